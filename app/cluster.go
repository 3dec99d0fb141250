package app

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
)

// The cluster as every user sees it: its machines, connected or last
// known, their GPUs' health and readings, and the jobs by state. Every
// signed-in user sees every machine and the counts (as GET /api/v1/nodes
// always did), and so does /metrics; only admins act on machines
// (nodes.go), and only they see who holds which GPU where the server
// hides users' names.

// ClusterStore is what the cluster's figures read.
type ClusterStore interface {
	CountJobsByState(ctx context.Context) (map[job.State]int, error)
	QueueCounts(ctx context.Context) ([]models.QueueCount, error)
}

// ClusterEngine is what the cluster's views ask of the engine;
// app.Engine embeds it.
type ClusterEngine interface {
	NodeStatuses() []engine.NodeStatus
	GoneNodes() []engine.GoneNode
	NodeAllocations() map[string]engine.NodeAllocation
	// Reservations are the last pass's, in its order.
	Reservations() []sched.Reservation
	// StoredReservations are those the leader stored, in its last
	// pass's order: a follower replica shows them.
	StoredReservations(ctx context.Context) ([]sched.Reservation, error)
	Stats() engine.Stats
	Scheduler() *sched.Scheduler
	// Fenced says why this replica, a leader, cannot confirm its lock
	// now, and since when; "" when it can (or does not lead).
	Fenced() (why string, since time.Time)
	// UserShares are the fair-share figures of team's members at the
	// last pass.
	UserShares(team string) []sched.UserShare
}

// UnheardAfter is how long an agent may be silent before its machine is
// shown as unheard, its figures as of then: agents send a heartbeat
// every second.
const UnheardAfter = 3 * time.Second

// JobCounts counts the jobs in each state.
func (s *App) JobCounts(ctx context.Context) (map[job.State]int, error) {
	n, err := s.cfg.Store.CountJobsByState(ctx)
	return n, stored(err)
}

// QueueCounts counts the unfinished jobs by queue, team and status
// (Labels: the queue's index, the team, "waiting" or "running"), as
// /metrics sends them.
func (s *App) QueueCounts(ctx context.Context) ([]Labeled, error) {
	counts, err := s.cfg.Store.QueueCounts(ctx)
	if err != nil {
		return nil, stored(err)
	}
	type key struct{ queue, team, status string }
	n := make(map[key]int)
	var order []key
	for _, c := range counts {
		status := "waiting"
		if c.State == job.Running {
			status = "running"
		}
		k := key{strconv.Itoa(c.QueueIndex), c.Team, status}
		if _, ok := n[k]; !ok {
			order = append(order, k)
		}
		n[k] += c.N
	}
	out := make([]Labeled, len(order))
	for i, k := range order {
		out[i] = Labeled{Labels: []string{k.queue, k.team, k.status}, V: float64(n[k])}
	}
	return out, nil
}

// QueueCount is how many queues the scheduler has.
func (s *App) QueueCount() int { return s.cfg.Engine.Scheduler().Queues() }

// NodeAPI is st as the API shows a machine, its GPUs all healthy.
func NodeAPI(st engine.NodeStatus) api.Node {
	n := api.Node{Name: st.Name, State: "ready", ConnectedAt: st.ConnectedAt, CPUs: st.CPUs, MemMiB: st.MemMiB,
		GPUs: []api.GPU{}, Jobs: st.Jobs}
	if n.Jobs == nil {
		n.Jobs = []int64{}
	}
	switch {
	case st.Draining && len(st.Jobs) == 0:
		n.State = "drained"
	case st.Draining:
		n.State = "draining"
	case st.Cordoned:
		n.State = "cordoned"
	}
	for _, d := range st.Devices {
		n.GPUs = append(n.GPUs, api.GPU{Index: d.Index, UUID: d.UUID, Model: d.Model, MemMiB: d.MemMiB, Health: "ok"})
	}
	return n
}

// NodeStateCounts counts the connected machines in each state: ready,
// cordoned, draining, drained.
func (s *App) NodeStateCounts() map[string]int {
	out := map[string]int{"ready": 0, "cordoned": 0, "draining": 0, "drained": 0}
	for _, st := range s.cfg.Engine.NodeStatuses() {
		out[NodeAPI(st).State]++
	}
	return out
}

// ConnectedNodes are the connected machines as the API shows them
// (DescribeNode), without when they were last heard.
func (s *App) ConnectedNodes() []api.Node {
	var out []api.Node
	for _, st := range s.cfg.Engine.NodeStatuses() {
		out = append(out, s.DescribeNode(st))
	}
	return out
}

// Fenced reports whether this replica is a leader that cannot confirm
// its lock now (the database is out).
func (s *App) Fenced() bool {
	why, _ := s.cfg.Engine.Fenced()
	return why != ""
}

// Nodes lists the machines as the API shows them: the connected
// ones, then those that disconnected, with their last known state.
// ages are the remote machines' heartbeat ages at now (a machine not in
// them is the server's own, always heard).
func (s *App) Nodes(ages map[string]time.Duration, now time.Time) []api.Node {
	out := []api.Node{}
	for _, n := range s.ConnectedNodes() {
		heard(&n, ages, now)
		out = append(out, n)
	}
	for _, g := range s.cfg.Engine.GoneNodes() {
		n := NodeAPI(g.Status)
		setHeard(&n, g.LostAt, now)
		n.Unheard = true
		out = append(out, n)
	}
	return out
}

// Node is the connected machine name as the API shows it.
func (s *App) Node(name string, ages map[string]time.Duration, now time.Time) (api.Node, error) {
	for _, st := range s.cfg.Engine.NodeStatuses() {
		if st.Name == name {
			n := s.DescribeNode(st)
			heard(&n, ages, now)
			return n, nil
		}
	}
	return api.Node{}, &Error{Kind: NotFound, Msg: "node disconnected"}
}

// NodeAfterAction is machine name after an admin's action on it (done,
// such as "cordoned"): on the leader, the machine; on a follower, which
// runs no machines, its hold as the store now has it and a note that the
// leader applies the action on its next pass. A follower cannot tell
// whether the machine is connected: a hold of one that is not takes
// effect when it connects.
func (s *App) NodeAfterAction(ctx context.Context, a Actor, name, done string, ages map[string]time.Duration, now time.Time) (api.Node, error) {
	if s.cfg.Leader == nil || s.cfg.Leader() {
		return s.Node(name, ages, now)
	}
	st, err := s.cfg.Engine.StoredNodeStates(ctx)
	if err != nil {
		return api.Node{}, stored(err)
	}
	n := api.Node{Name: name, State: "ready", GPUs: []api.GPU{}, Jobs: []int64{},
		Note: done + "; takes effect on the leader's next pass"}
	switch {
	case st.Draining[name]:
		n.State = "draining"
	case st.Cordoned[name]:
		n.State = "cordoned"
	}
	return n, nil
}

// DescribeNode is a connected machine as the API shows it: its state,
// the health of each GPU, whether its live memory is known, and what is
// allocated of it.
func (s *App) DescribeNode(st engine.NodeStatus) api.Node {
	n := NodeAPI(st)
	for _, f := range s.cfg.Engine.GPUFaults() {
		if f.Node != st.Name {
			continue
		}
		for i := range n.GPUs {
			if n.GPUs[i].Index == f.Index {
				n.GPUs[i].Health, n.GPUs[i].Fault = "unhealthy", f.Reason
			}
		}
	}
	for _, en := range s.cfg.Engine.Nodes() {
		if en.Name() == st.Name {
			n.LiveMemoryUnavailable = engine.LiveMemoryUnavailable(en)
		}
	}
	al := s.cfg.Engine.NodeAllocations()[st.Name]
	n.CPUAllocatedMilli, n.MemAllocatedMiB = al.CPUMilli, al.MemMiB
	return n
}

// heard sets what n says of when its machine was last heard.
func heard(n *api.Node, ages map[string]time.Duration, now time.Time) {
	age, ok := ages[n.Name]
	if !ok {
		return
	}
	setHeard(n, now.Add(-age), now)
	n.Unheard = age > UnheardAfter
}

func setHeard(n *api.Node, at, now time.Time) {
	s := now.Sub(at).Seconds()
	n.LastHeardAt, n.LastHeardS = &at, &s
}

// GPUName names a GPU of the cluster: "node/index".
func GPUName(node string, index int) string { return node + "/" + strconv.Itoa(index) }

// GPUFaults maps each GPU out of service (GPUName) to its fault.
func (s *App) GPUFaults() map[string]string {
	out := make(map[string]string)
	for _, f := range s.cfg.Engine.GPUFaults() {
		out[GPUName(f.Node, f.Index)] = f.Reason
	}
	return out
}

// ShownMachine is a machine as the cluster page and /metrics show it: a
// connected one, or the last known state of one that disconnected.
type ShownMachine struct {
	Name string
	// State is ready, cordoned, draining, drained or disconnected.
	State string
	// Connected: it is connected now; else LostAt is when it left.
	Connected bool
	LostAt    time.Time
	// LiveMemory says why its live GPU memory is unknown; empty when it
	// is known.
	LiveMemory string
	Devices    []gpu.Device
	CPUs       int
	MemMiB     int64
	Allocated  engine.NodeAllocation
	// Samples are its GPUs' readings: now, or the last ones.
	Samples []gpu.Sample
}

// ClusterMachines is the cluster's machines as the cluster page shows
// them, with the GPUs out of service.
type ClusterMachines struct {
	// Machines are the connected ones, then those that disconnected.
	Machines []ShownMachine
	// Faults maps each GPU out of service (GPUName) to its fault.
	Faults map[string]string
}

// Cluster is the cluster's machines at now. disconnected: with those that left, as last known.
func (s *App) Cluster(now time.Time, disconnected bool) ClusterMachines {
	out := ClusterMachines{Faults: s.GPUFaults()}
	allocs := s.cfg.Engine.NodeAllocations()
	state := make(map[string]string)
	for _, st := range s.cfg.Engine.NodeStatuses() {
		state[st.Name] = NodeAPI(st).State
	}
	for _, n := range s.cfg.Engine.Nodes() {
		cpus, mem := n.Resources()
		out.Machines = append(out.Machines, ShownMachine{Name: n.Name(), State: state[n.Name()], Connected: true,
			LiveMemory: engine.LiveMemoryUnavailable(n), Devices: n.Devices(), CPUs: cpus, MemMiB: mem,
			Allocated: allocs[n.Name()], Samples: n.Sample(now)})
	}
	if !disconnected {
		return out
	}
	for _, g := range s.cfg.Engine.GoneNodes() {
		out.Machines = append(out.Machines, ShownMachine{Name: g.Status.Name, State: "disconnected", LostAt: g.LostAt,
			Devices: g.Status.Devices, CPUs: g.Status.CPUs, MemMiB: g.Status.MemMiB,
			Allocated: allocs[g.Status.Name], Samples: g.Samples})
	}
	return out
}

// PlacementLiveMemory says why the live GPU memory of the machines of a
// placement ("node:index" per GPU) is unknown; empty when it is known on
// all of them.
func (s *App) PlacementLiveMemory(placement []string) string {
	var whys []string
	seen := make(map[string]bool)
	for _, p := range placement {
		node, _, _ := strings.Cut(p, ":")
		if seen[node] {
			continue
		}
		seen[node] = true
		for _, n := range s.cfg.Engine.Nodes() {
			if n.Name() == node {
				if why := engine.LiveMemoryUnavailable(n); why != "" {
					whys = append(whys, why)
				}
			}
		}
	}
	return strings.Join(whys, "; ")
}

// LogPaths are where the connected machines that keep job output on this
// server's disk (the built-in agents, and the server's copy of remote
// ones') keep job id's: of machine node only, or of every one when node
// is "". For a caller that checked who may read it.
func (s *App) LogPaths(id int64, node string) []string {
	var out []string
	for _, n := range s.cfg.Engine.Nodes() {
		if node != "" && n.Name() != node {
			continue
		}
		if lp, ok := n.(interface{ LogPath(int64) string }); ok {
			out = append(out, lp.LogPath(id))
		}
	}
	return out
}
