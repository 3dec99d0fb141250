package web

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
)

// The gpu:<uuid> and team:<name> topics of the live stream (hub.go).

// GPUTopicJSON is what gpu:<uuid> sends: the GPU and its points, the last
// 10 minutes in the snapshot, the newest second in each update.
type GPUTopicJSON struct {
	UUID   string            `json:"uuid"`
	Node   string            `json:"node"`
	Index  int               `json:"index"`
	Model  string            `json:"model"`
	Points []telemetry.Point `json:"points"`
}

// TeamTopicJSON is what team:<name> sends: the team's GPUs in use,
// borrowed and guaranteed, and its unfinished jobs, running ones first,
// then waiting ones in queue order.
type TeamTopicJSON struct {
	Team  TeamShareJSON      `json:"team"`
	Queue []TeamQueueJobJSON `json:"queue"`
}

// TeamQueueJobJSON is one of the team's jobs and the priority queue it is in.
type TeamQueueJobJSON struct {
	QueueJobJSON
	Queue int `json:"queue"`
}

// gpuSnapshot is gpu:<uuid> for any user: every user may see every GPU,
// as in GET /api/v1/gpus.
func (s *Server) gpuSnapshot(uuid string) (GPUTopicJSON, error) {
	g, ok := s.gpuByUUID(uuid)
	if !ok {
		return GPUTopicJSON{}, errTopic(fmt.Sprintf("no GPU %q is connected", uuid))
	}
	pts := s.cfg.Telemetry.GPU(g.Key, s.cfg.Now().Add(-historyWindow).Unix())
	if pts == nil {
		pts = []telemetry.Point{}
	}
	return GPUTopicJSON{UUID: uuid, Node: g.Key.Node, Index: g.Key.Index, Model: g.Device.Model, Points: pts}, nil
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
		s.broadcast(s.hub.subscribers(t), wsOut{Topic: t, Type: "update", Data: GPUTopicJSON{
			UUID: g.Device.UUID, Node: g.Key.Node, Index: g.Key.Index, Model: g.Device.Model, Points: []telemetry.Point{p}}})
	}
}

// teamSnapshot is team:<name> for user u: only its members (its lead
// among them) and admins. A team that does not exist gets the same answer
// as one the user may not see, so team names cannot be probed.
func (s *Server) teamSnapshot(ctx context.Context, u *models.User, name string) (TeamTopicJSON, error) {
	refused := errTopic(fmt.Sprintf("no team %q that you may see", name))
	if !canSee(u, name) {
		return TeamTopicJSON{}, refused
	}
	if _, err := s.cfg.Store.Team(ctx, name); errors.Is(err, models.ErrNotFound) {
		return TeamTopicJSON{}, refused
	} else if err != nil {
		return TeamTopicJSON{}, err
	}
	all, err := s.teamTopics(ctx)
	if err != nil {
		return TeamTopicJSON{}, err
	}
	return all(name), nil
}

// teamTopics reads the teams and queues once and returns the topic's data
// per team.
func (s *Server) teamTopics(ctx context.Context) (func(team string) TeamTopicJSON, error) {
	shares, err := s.teamShares(ctx)
	if err != nil {
		return nil, err
	}
	q, err := s.queuesFor(ctx, &models.User{Role: models.RoleAdmin})
	if err != nil {
		return nil, err
	}
	return func(team string) TeamTopicJSON {
		out := TeamTopicJSON{Team: TeamShareJSON{Name: team, Factor: 1}, Queue: []TeamQueueJobJSON{}}
		for _, sh := range shares {
			if sh.Name == team {
				out.Team = sh
			}
		}
		for _, qu := range q.Queues {
			for _, j := range qu.Jobs {
				if j.Team == team {
					out.Queue = append(out.Queue, TeamQueueJobJSON{QueueJobJSON: j, Queue: qu.Index})
				}
			}
		}
		return out
	}, nil
}

// publishTeams sends each followed team its standing and queue. The
// followers were checked when they subscribed.
func (s *Server) publishTeams(ctx context.Context) {
	topics := s.hub.followed(topicTeam)
	if len(topics) == 0 {
		return
	}
	all, err := s.teamTopics(ctx)
	if err != nil {
		s.cfg.Logger.Warn("live stream: teams", "err", err)
		return
	}
	for _, t := range topics {
		s.broadcast(s.hub.subscribers(t), wsOut{Topic: t, Type: "update", Data: all(strings.TrimPrefix(t, topicTeam))})
	}
}
