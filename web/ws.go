package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/live"
)

// requireAnyUser authenticates a bearer token or, failing that, a session
// cookie: the websocket serves browsers and programs alike.
func (s *Server) requireAnyUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if strings.HasPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ") {
			return s.requireAPIUser(next)(c)
		}
		return s.loadSessionUser(func(c echo.Context) error {
			if currentUser(c) == nil {
				return echo.NewHTTPError(http.StatusUnauthorized, "log in, or send a bearer token")
			}
			return next(c)
		})(c)
	}
}

// ws serves the live stream described in hub.go, for as long as the
// client's credential holds (sockets.go).
func (s *Server) ws(c echo.Context) error {
	u := currentUser(c)
	if !s.hub.reserve(u.ID, s.cfg.MaxSocketsPerUser) {
		return echo.NewHTTPError(http.StatusTooManyRequests,
			fmt.Sprintf("you have %d live connections open already: close one first", s.cfg.MaxSocketsPerUser))
	}
	defer s.hub.release(u.ID)
	conn, err := upgrader.Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // the upgrader has answered
	}
	cl := newClient(u, conn)
	cl.cred, cl.opened = currentCredential(c), s.cfg.Now()
	conn.SetReadLimit(maxClientBytes)
	s.hub.add(cl)
	defer s.hub.remove(cl)
	ctx := c.Request().Context()
	go cl.writeLoop(ctx, s.cfg.Logger)
	if t := c.QueryParam("topics"); t != "" {
		s.subscribe(ctx, cl, strings.Split(t, ","))
	}
	for {
		in, err := readMessage(conn)
		var ce *websocket.CloseError
		switch {
		case errors.As(err, &ce), errors.Is(err, websocket.ErrReadLimit):
			cl.close(websocket.CloseNormalClosure, "")
			return nil
		case err != nil && strings.Contains(err.Error(), "must be JSON"):
			cl.send(wsOut{Type: "error", Error: err.Error()})
			continue
		case err != nil:
			cl.close(websocket.CloseGoingAway, "")
			return nil
		}
		// Unsubscribe first: a message that does both has its snapshots
		// sent once the old topics are gone, and a topic in both lists
		// is followed afresh, with a new snapshot.
		for _, t := range in.Unsubscribe {
			s.hub.unfollow(cl, strings.TrimSpace(t))
		}
		s.subscribe(ctx, cl, in.Subscribe)
	}
}

// subscribe checks each topic against what the client's user may see,
// then sends its snapshot.
func (s *Server) subscribe(ctx context.Context, cl *wsClient, topics []string) {
	for _, t := range topics {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		data, err := s.snapshot(ctx, cl.viewer(), t)
		if err != nil {
			cl.send(wsOut{Topic: t, Type: "error", Error: err.Error()})
			continue
		}
		if !s.hub.follow(cl, t) {
			cl.send(wsOut{Topic: t, Type: "error", Error: fmt.Sprintf("at most %d topics per connection", maxTopics)})
			continue
		}
		cl.send(wsOut{Topic: t, Type: "snapshot", Data: data})
	}
}

// errTopic explains a topic a user may not have.
type errTopic string

func (e errTopic) Error() string { return string(e) }

// snapshot is the current state of topic for user u.
func (s *Server) snapshot(ctx context.Context, u *app.User, topic string) (any, error) {
	switch {
	case topic == topicGPUs:
		return s.gpuWall(), nil
	case topic == topicQueues:
		m, err := s.app.Moment(ctx)
		if err != nil {
			return nil, err
		}
		return s.app.QueuesAt(ctx, m, app.Actor{User: u}, queueTopic)
	case topic == topicJCT:
		return s.app.JCTStats(ctx, 24*time.Hour)
	case strings.HasPrefix(topic, topicGPU):
		return s.gpuSnapshot(strings.TrimPrefix(topic, topicGPU))
	case strings.HasPrefix(topic, topicTeam):
		return s.teamSnapshot(ctx, u, strings.TrimPrefix(topic, topicTeam))
	}
	id, ok := jobTopicID(topic)
	if !ok {
		return nil, errTopic(fmt.Sprintf("unknown topic %q: want gpus, queues, jct, job:<id>, gpu:<uuid> or team:<name>", topic))
	}
	j, err := s.app.FollowedJob(ctx, app.Actor{User: u}, id)
	if err != nil {
		return nil, topicRefusal(err)
	}
	m, err := s.app.ShownMoment(ctx, *j)
	if err != nil {
		return nil, err
	}
	pts := s.cfg.Telemetry.Job(id, s.cfg.Now().Add(-historyWindow).Unix())
	return api.JobUpdate{Job: s.app.JobOf(m, j), Memory: jobMemoryOf(pts)}, nil
}

// Run publishes updates to subscribed clients until ctx ends: at each
// frame of Config.Live (the machines' readings coalesced per GPU, at most
// one a second) every topic gets the latest state of every machine, and
// the JCT figures every fifth frame. It also ends or narrows the live
// connections whose credential or rights changed (sockets.go) and keeps
// the directory's accounts in step (directory.go).
func (s *Server) Run(ctx context.Context) {
	watched := make(chan struct{})
	go func() { s.watchSockets(ctx); close(watched) }()
	defer func() { <-watched }()
	synced := make(chan struct{})
	go func() { s.syncDirectory(ctx); close(synced) }()
	defer func() { <-synced }()
	dbWatched := make(chan struct{})
	go func() { s.watchDatabase(ctx); close(dbWatched) }()
	defer func() { <-dbWatched }()
	var frames <-chan live.Frame
	if s.cfg.Live != nil {
		frames = s.cfg.Live.Frames()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-frames:
			s.publish(ctx, f.Frame, f.Seq%5 == 1)
			s.scale.liveAge.Store(int64(s.cfg.Now().Sub(f.Oldest())))
		}
	}
}

func (s *Server) publish(ctx context.Context, f telemetry.Frame, jct bool) {
	s.broadcast(s.hub.subscribers(topicGPUs), wsOut{Topic: topicGPUs, Type: "update", Data: s.frameUpdate(f)})
	s.publishLanes()
	s.publishGPUs(f)
	jobs, queues, teams := s.hub.jobTopics(), s.hub.subscribers(topicQueues), s.hub.followed(topicTeam)
	switch {
	case len(queues) > 0 || len(teams) > 0:
		// One moment for every topic of this second, so that they agree.
		m, err := s.app.Moment(ctx)
		if err != nil {
			s.cfg.Logger.Warn("live stream", "err", err)
		} else {
			s.publishJobs(ctx, m, f, jobs)
			s.publishQueues(ctx, m, queues)
			s.publishTeams(ctx, m)
		}
	case len(jobs) > 0:
		s.publishJobs(ctx, nil, f, jobs) // the followed jobs' moment alone
	}
	if subs := s.hub.subscribers(topicJCT); jct && len(subs) > 0 {
		st, err := s.app.JCTStats(ctx, 24*time.Hour)
		if err == nil {
			s.broadcast(subs, wsOut{Topic: topicJCT, Type: "update", Data: st})
		}
	}
}

// publishJobs sends each followed job its state and its memory in frame
// f, converted with m, or where m is nil with the moment of these jobs
// alone (shownMoment), which reads none of the rest of the queue.
func (s *Server) publishJobs(ctx context.Context, m *app.Moment, f telemetry.Frame, ids []int64) {
	js, err := s.app.FollowedJobs(ctx, ids) // those gone since they were followed are left out
	if err != nil {
		s.cfg.Logger.Warn("live stream", "err", err)
		return
	}
	if m == nil {
		if m, err = s.app.ShownMoment(ctx, js...); err != nil {
			s.cfg.Logger.Warn("live stream", "err", err)
			return
		}
	}
	for i := range js {
		j, id := &js[i], js[i].ID
		topic := fmt.Sprintf("%s%d", topicJob, id)
		upd := api.JobUpdate{Job: s.app.JobOf(m, j), Memory: []api.JobMemory{}}
		for _, g := range f.GPUs {
			for _, jm := range g.Jobs {
				if jm.JobID == id {
					upd.Memory = append(upd.Memory, api.JobMemory{T: f.T, Node: g.Node, GPU: g.Index, MemMiB: jm.MemMiB})
				}
			}
		}
		s.broadcast(seeing(s.hub.subscribers(topic), j.Team), wsOut{Topic: topic, Type: "update", Data: upd})
	}
}

// publishQueues sends the queues to their followers: the first page of
// each queue with its counts (queueTopic). What a follower may see depends
// on their role and team: the message is made and encoded once per pair.
func (s *Server) publishQueues(ctx context.Context, m *app.Moment, clients []*wsClient) {
	byViewer := make(map[string][]*wsClient)
	for _, cl := range clients {
		u := cl.viewer()
		key := string(u.Role) + "/" + u.Team
		byViewer[key] = append(byViewer[key], cl)
	}
	for _, cls := range byViewer {
		q, err := s.app.QueuesAt(ctx, m, app.Actor{User: cls[0].viewer()}, queueTopic)
		if err != nil {
			s.cfg.Logger.Warn("live stream", "err", err)
			return
		}
		msg := wsOut{Topic: topicQueues, Type: "update", Data: q}
		b, err := encode(msg)
		if err == nil {
			msg, err = prepare(msg, b)
		}
		if err != nil {
			s.cfg.Logger.Error("live stream", "err", err)
			continue
		}
		for _, cl := range cls {
			cl.send(msg)
		}
	}
}

// queueTopic is what the queues topic sends: each queue's counts and its
// first queueTopicPage jobs, whatever the length of the queue.
var queueTopic = app.QueuePage{Queue: -1, Limit: queueTopicPage}

// broadcast sends the same message to clients, encoding it only once,
// unless it equals the topic's last broadcast of its type.
func (s *Server) broadcast(clients []*wsClient, m wsOut) {
	if len(clients) == 0 {
		return
	}
	b, err := encode(m)
	if err != nil {
		s.cfg.Logger.Error("live stream", "err", err)
		return
	}
	if !s.hub.changed(m.Topic, m.Type, b) {
		return
	}
	if m, err = prepare(m, b); err != nil {
		s.cfg.Logger.Error("live stream", "err", err)
		return
	}
	for _, cl := range clients {
		cl.send(m)
	}
}
