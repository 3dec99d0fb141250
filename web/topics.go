package web

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
)

// The gpu:<uuid> and team:<name> topics of the live stream (hub.go).

// gpuSnapshot is gpu:<uuid> for any user: every user may see every GPU,
// as in GET /api/v1/gpus.
func (s *Server) gpuSnapshot(uuid string) (api.GPUSeries, error) {
	g, ok := s.gpuByUUID(uuid)
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
	byKey := make(map[telemetry.GPUKey]telemetry.Point, len(f.GPUs))
	for _, g := range f.GPUs {
		byKey[g.GPUKey] = g.Point
	}
	byUUID := make(map[string]connectedGPU)
	for _, g := range s.connectedGPUs() {
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
func (s *Server) teamSnapshot(ctx context.Context, u *models.User, name string) (api.TeamTopic, error) {
	if err := app.MaySeeTeam(u, name); err != nil {
		return api.TeamTopic{}, topicRefusal(err)
	}
	refused := errTopic(fmt.Sprintf("no team %q that you may see", name))
	m, err := s.moment(ctx)
	if err != nil {
		return api.TeamTopic{}, err
	}
	if !slices.ContainsFunc(m.teams, func(t models.Team) bool { return t.Name == name }) {
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
func (s *Server) teamTopic(ctx context.Context, m *moment, u *models.User, name string) (api.TeamTopic, error) {
	out := api.TeamTopic{Team: api.TeamShare{Name: name, Factor: 1}, Queue: []api.TeamQueueJob{}}
	for _, t := range m.teams {
		if t.Name == name {
			out.Team = m.teamShare(t)
		}
	}
	type shown struct {
		id    int64
		queue int
	}
	var page []shown
	for qi, rows := range queueOrder(m, s.app.QueueCount()) {
		for _, r := range rows {
			if r.Team != name {
				continue
			}
			out.QueueTotal++
			if len(page) < teamQueuePage {
				page = append(page, shown{r.ID, qi})
			}
		}
	}
	ids := make([]int64, len(page))
	for i, p := range page {
		ids[i] = p.id
	}
	js, err := s.app.TeamJobs(ctx, app.Actor{User: u}, name, ids)
	if err != nil {
		return api.TeamTopic{}, err
	}
	queueOf := make(map[int64]int, len(page))
	for _, p := range page {
		queueOf[p.id] = p.queue
	}
	for i := range js {
		j := &js[i]
		out.Queue = append(out.Queue, api.TeamQueueJob{QueueJob: m.queueJob(j, canSee(u, j.Team)), Queue: queueOf[j.ID]})
		if j.State == job.Running && out.AsOf == nil {
			now := m.now
			out.AsOf = &now // its figures grow: say when they were read
		}
	}
	return out, nil
}

// publishTeams sends each followed team its standing and queue, from one
// moment, to the followers who may see the team now.
func (s *Server) publishTeams(ctx context.Context, m *moment) {
	admin := &models.User{Role: models.RoleAdmin}
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
