package web

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/telemetry"
)

// The gpu:<uuid> and team:<name> topics of the live stream (hub.go).

// gpuSnapshot is gpu:<uuid> for any user: every user may see every GPU,
// as in GET /api/v1/gpus.
func (s *Server) gpuSnapshot(uuid string) (api.GPUSeries, error) {
	g, ok := s.app.GPUByUUID(uuid)
	if !ok {
		return api.GPUSeries{}, errTopic(fmt.Sprintf("no GPU %q is connected", uuid))
	}
	pts := s.cfg.Telemetry.GPU(g.Key, s.cfg.Now().Add(-historyWindow).Unix())
	return api.GPUSeries{UUID: uuid, Node: g.Key.Node, Index: g.Key.Index, Model: g.Device.Model, Points: pointsOf(pts)}, nil
}

// publishGPUs sends each followed GPU its point of frame f.
func (s *Server) publishGPUs(f telemetry.Frame) {
	topics := s.hub.followed(topicGPU)
	if len(topics) == 0 {
		return
	}
	byKey := make(map[gpu.Ref]telemetry.Point, len(f.GPUs))
	for _, g := range f.GPUs {
		byKey[g.Ref] = g.Point
	}
	byUUID := make(map[string]app.ConnectedGPU)
	for _, g := range s.app.ConnectedGPUs() {
		byUUID[g.Device.UUID] = g
	}
	for _, t := range topics {
		g, ok := byUUID[strings.TrimPrefix(t, topicGPU)]
		if !ok {
			continue
		}
		p, ok := byKey[g.Key]
		if !ok {
			continue
		}
		s.broadcast(s.hub.subscribers(t), wsOut{Topic: t, Type: "update", Data: api.GPUSeries{
			UUID: g.Device.UUID, Node: g.Key.Node, Index: g.Key.Index, Model: g.Device.Model, Points: []api.Point{pointOf(p)}}})
	}
}

// teamSnapshot is team:<name> for user u: only its members (its lead
// among them) and admins. A team that does not exist gets the same answer
// as one the user may not see, so team names cannot be probed.
func (s *Server) teamSnapshot(ctx context.Context, u *app.User, name string) (api.TeamTopic, error) {
	if err := app.MaySeeTeam(u, name); err != nil {
		return api.TeamTopic{}, topicRefusal(err)
	}
	refused := errTopic(fmt.Sprintf("no team %q that you may see", name))
	m, err := s.app.Moment(ctx)
	if err != nil {
		return api.TeamTopic{}, err
	}
	if _, ok := m.Team(name); !ok {
		return api.TeamTopic{}, refused
	}
	return s.teamTopic(ctx, m, u, name)
}

// teamQueuePage is how many of a team's unfinished jobs its topic sends
// and its page shows; TeamTopic.QueueTotal counts them all.
const teamQueuePage = 50

// teamTopic is team:<name> at m for u, who may see the team: its standing
// and its first teamQueuePage unfinished jobs in queueOrder, queue by
// queue, with their count.
func (s *Server) teamTopic(ctx context.Context, m *app.Moment, u *app.User, name string) (api.TeamTopic, error) {
	out := api.TeamTopic{Team: api.TeamShare{Name: name, Factor: 1}, Queue: []api.TeamQueueJob{}}
	if t, ok := m.Team(name); ok {
		out.Team = m.TeamShare(t)
	}
	page, total := m.TeamQueue(name, s.app.QueueCount(), teamQueuePage)
	out.QueueTotal = total
	ids := make([]int64, len(page))
	for i, p := range page {
		ids[i] = p.ID
	}
	js, err := s.app.TeamJobs(ctx, app.Actor{User: u}, name, ids)
	if err != nil {
		return api.TeamTopic{}, err
	}
	queueOf := make(map[int64]int, len(page))
	for _, p := range page {
		queueOf[p.ID] = p.Queue
	}
	for i := range js {
		j := &js[i]
		out.Queue = append(out.Queue, api.TeamQueueJob{QueueJob: m.QueueJob(j, canSee(u, j.Team)), Queue: queueOf[j.ID]})
		if j.State == job.Running && out.AsOf == nil {
			now := m.Now
			out.AsOf = &now // its figures grow: say when they were read
		}
	}
	return out, nil
}

// publishTeams sends each followed team its standing and queue, from one
// moment, to the followers who may see the team now.
func (s *Server) publishTeams(ctx context.Context, m *app.Moment) {
	admin := app.AllSeeing()
	for _, t := range s.hub.followed(topicTeam) {
		name := strings.TrimPrefix(t, topicTeam)
		tt, err := s.teamTopic(ctx, m, admin, name)
		if err != nil {
			s.cfg.Logger.Warn("live stream", "topic", t, "err", err)
			continue
		}
		s.broadcast(seeing(s.hub.subscribers(t), name), wsOut{Topic: t, Type: "update", Data: tt})
	}
}
