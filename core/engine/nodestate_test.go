package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// nodeStateMem keeps the machines' state in memory, as the real store
// does across restarts. Every memStore has one: a store that forgot the
// state would undo the engine's own cordons on its next re-read.
type nodeStateMem struct {
	mu      sync.Mutex
	st      NodeStates
	loadErr error // NodeStates fails with it while set
}

func (s *nodeStateMem) NodeStates(context.Context) (NodeStates, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := NodeStates{Cordoned: map[string]bool{}, Draining: map[string]bool{}, Faults: append([]GPUFault(nil), s.st.Faults...)}
	for k, v := range s.st.Cordoned {
		out.Cordoned[k] = v
	}
	for k, v := range s.st.Draining {
		out.Draining[k] = v
	}
	return out, s.loadErr
}

func (s *nodeStateMem) SetNodeCordoned(_ context.Context, node string, on bool, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Cordoned == nil {
		s.st.Cordoned = map[string]bool{}
	}
	s.st.Cordoned[node] = on
	return nil
}

func (s *nodeStateMem) SetNodeDraining(_ context.Context, node string, on bool, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st.Draining == nil {
		s.st.Draining = map[string]bool{}
	}
	s.st.Draining[node] = on
	return nil
}

func (s *nodeStateMem) RecordGPUFault(_ context.Context, f GPUFault) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, g := range s.st.Faults {
		if g.Node == f.Node && g.Index == f.Index {
			s.st.Faults[i] = f
			return nil
		}
	}
	s.st.Faults = append(s.st.Faults, f)
	return nil
}

func (s *nodeStateMem) DeleteGPUFault(_ context.Context, node string, index int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.st.Faults[:0]
	for _, g := range s.st.Faults {
		if g.Node != node || g.Index != index {
			out = append(out, g)
		}
	}
	s.st.Faults = out
	return nil
}

func TestRestartKeepsGPUsOutOfServiceAndCordons(t *testing.T) {
	ctx := context.Background()
	mem := newMemStore()

	// The first server: GPU n0/0 falls off the bus, n1 is cordoned and
	// n2 drained.
	e1, clock := newTestEngine(t, mem, newFakeNode("n1", 1), newFakeNode("n2", 1))
	sick := &sickNode{fakeNode: newFakeNode("n0", 2), errs: map[int]gpu.Sample{}}
	e1.nodes["n0"] = sick
	mustPass(t, e1)
	sick.errs[0] = gpu.Sample{XIDErrors: 1, LastXID: 79}
	mustPass(t, e1)
	if err := e1.SetCordoned("n1", true); err != nil {
		t.Fatal(err)
	}
	if err := e1.SetDraining("n2", true); err != nil {
		t.Fatal(err)
	}

	// The restarted server (or the next leader) loads it when it starts:
	// a 1-GPU job goes to n0's GPU 1, not to the failed GPU nor to the
	// held machines, though n0's counters read zero again (its agent
	// restarted too).
	mem.jobs[1] = &Job{ID: 1, GPUs: 1, State: job.Queued, SubmittedAt: clock.t}
	n0 := newFakeNode("n0", 2)
	n1, n2 := newFakeNode("n1", 1), newFakeNode("n2", 1)
	e2, _ := newTestEngine(t, mem, n0, n1, n2)
	if err := e2.loadNodeStates(ctx); err != nil {
		t.Fatal(err)
	}
	mustPass(t, e2)
	if len(n0.starts) != 1 || n0.starts[0].GPUs[0] != 1 || len(n1.starts)+len(n2.starts) != 0 {
		t.Fatalf("starts n0 %+v n1 %+v n2 %+v; want job 1 on n0's GPU 1 only", n0.starts, n1.starts, n2.starts)
	}
	f := e2.GPUFaults()
	if len(f) != 1 || f[0].Node != "n0" || f[0].Index != 0 || !strings.Contains(f[0].Reason, "XID 79") {
		t.Fatalf("faults after restart = %+v, want n0/0 with XID 79", f)
	}
	st := e2.NodeStatuses()
	if !st[1].Cordoned || st[1].Draining || !st[2].Draining || st[2].Cordoned {
		t.Errorf("node statuses after restart = %+v, want n1 cordoned and n2 draining", st)
	}

	// An admin's clear and uncordon reach the store: a third start sees
	// neither.
	if err := e2.ClearGPUFault("n0", 0); err != nil {
		t.Fatal(err)
	}
	if err := e2.SetCordoned("n1", false); err != nil {
		t.Fatal(err)
	}
	e3, _ := newTestEngine(t, mem, newFakeNode("n0", 2), newFakeNode("n1", 1))
	if err := e3.loadNodeStates(ctx); err != nil {
		t.Fatal(err)
	}
	if f := e3.GPUFaults(); len(f) != 0 {
		t.Errorf("faults after clear and restart = %+v, want none", f)
	}
	if e3.unschedulable("n1") || !e3.unschedulable("n2") {
		t.Errorf("after restart: n1 unschedulable %v (want false), n2 %v (want true)", e3.unschedulable("n1"), e3.unschedulable("n2"))
	}
}

func TestRunFailsWhenTheMachinesStateCannotBeLoaded(t *testing.T) {
	store := newMemStore()
	store.loadErr = errors.New("database gone")
	e, _ := newTestEngine(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Run(ctx); err == nil || !strings.Contains(err.Error(), "database gone") {
		t.Errorf("Run = %v, want the load error: scheduling on GPUs out of service is worse than not", err)
	}
}

// reportingNode is a sickNode whose agent reports the GPUs of the runs it
// still has when it reconnects.
type reportingNode struct {
	*sickNode
	runGPUs map[int64][]int
}

func (n *reportingNode) RunGPUs(id int64) ([]int, bool) {
	g, ok := n.runGPUs[id]
	return g, ok
}

func TestAdoptedRunCountsOnlyItsOwnGPUs(t *testing.T) {
	tests := []struct {
		name    string
		runGPUs map[int64][]int // nil: an agent that does not report them
		want    job.State
	}{
		{"agent reports the run on GPU 1: GPU 0's fault is not the run's", map[int64][]int{1: {1}}, job.Failed},
		{"agent reports the run on GPU 0: its fault requeues the run", map[int64][]int{1: {0}}, job.Queued},
		{"older agent: any GPU of the machine counts", nil, job.Queued},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			start := t0.Add(-time.Hour)
			store := newMemStore(Job{ID: 1, GPUs: 1, State: job.Running, Placement: []gpu.Ref{{Node: "n0", Index: 1}},
				LastStartAt: &start, SubmittedAt: start})
			e, clock := newTestEngine(t, store)
			sick := &sickNode{fakeNode: newFakeNode("n0", 2), errs: map[int]gpu.Sample{}}
			sick.running[1] = 1
			var n Node = sick
			if tc.runGPUs != nil {
				n = &reportingNode{sickNode: sick, runGPUs: tc.runGPUs}
			}
			// The agent reconnects and reports job 1: the engine adopts it.
			go func() { _ = e.AddNode(ctx, n) }()
			(<-e.calls)(ctx)
			mustPass(t, e)
			sick.errs[0] = gpu.Sample{ECCErrors: 2}
			delete(sick.running, 1)
			e.testExit(ctx, exit("n0", 1, 3, clock.t.Add(time.Minute)))
			if got := store.state(1); got != tc.want {
				t.Errorf("state %s (%q), want %s", got, store.reason[1], tc.want)
			}
			if f := e.GPUFaults(); len(f) != 1 || f[0].Index != 0 {
				t.Errorf("faults = %+v, want GPU 0", f)
			}
		})
	}
}

func TestMirroredDrainsAreNotKept(t *testing.T) {
	store := newMemStore()
	e, _ := newTestEngine(t, store, newFakeNode("s1", 1))
	if err := e.MirrorDraining("s1", true); err != nil {
		t.Fatal(err)
	}
	if !e.unschedulable("s1") {
		t.Error("a machine Slurm drains takes jobs")
	}
	if err := e.MirrorDraining("nowhere", true); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("mirror a drain of an unknown machine: %v", err)
	}
	if st, _ := store.NodeStates(context.Background()); len(st.Draining) != 0 {
		t.Errorf("kept drains = %v; Slurm's drains are Slurm's to say again", st.Draining)
	}
}

func TestLeaderPicksUpHoldsAndClearsMadeThroughAFollower(t *testing.T) {
	mem := newMemStore()

	// The leader: GPU n0/0 falls off the bus.
	lead, clock := newTestEngine(t, mem, newFakeNode("n1", 1))
	sick := &sickNode{fakeNode: newFakeNode("n0", 2), errs: map[int]gpu.Sample{}}
	lead.nodes["n0"] = sick
	if err := lead.loadNodeStates(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustPass(t, lead)
	sick.errs[0] = gpu.Sample{XIDErrors: 1, LastXID: 79}
	mustPass(t, lead)

	// A follower, with no machines, cordons n1, drains n0 and clears
	// n0/0: the store only.
	fol, _ := newTestEngine(t, mem)
	fol.SetFollower()
	if err := fol.ClearGPUFault("n0", 1); !errors.Is(err, ErrGPUHealthy) {
		t.Errorf("follower's clear of a healthy GPU: %v, want ErrGPUHealthy", err)
	}
	for _, step := range []func() error{
		func() error { return fol.SetCordoned("n1", true) },
		func() error { return fol.ClearGPUFault("n0", 0) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := mem.NodeStates(context.Background()); !st.Cordoned["n1"] || len(st.Faults) != 0 {
		t.Fatalf("store after the follower's actions = %+v, want n1 cordoned and no fault", st)
	}
	if !lead.gpuUnhealthy("n0", 0) || lead.unschedulable("n1") {
		t.Fatal("the leader changed before its next pass")
	}

	// The leader's next pass picks both up: n1 takes no job, n0/0 does.
	clock.t = clock.t.Add(lead.cfg.Interval)
	mem.jobs[1] = &Job{ID: 1, GPUs: 2, State: job.Queued, SubmittedAt: clock.t}
	mustPass(t, lead)
	if !lead.unschedulable("n1") || lead.gpuUnhealthy("n0", 0) {
		t.Errorf("after a pass: n1 unschedulable %v (want true), n0/0 unhealthy %v (want false)",
			lead.unschedulable("n1"), lead.gpuUnhealthy("n0", 0))
	}
	if len(sick.starts) != 1 || len(sick.starts[0].GPUs) != 2 {
		t.Errorf("starts on n0 = %+v, want the 2-GPU job on both its GPUs", sick.starts)
	}

	// The follower uncordons; the leader's own drain of n1 (store first)
	// and a later fault outlive re-reads that do not change them.
	if err := fol.SetCordoned("n1", false); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(lead.cfg.Interval)
	mustPass(t, lead)
	if lead.unschedulable("n1") {
		t.Error("n1 still cordoned after the follower's uncordon and a pass")
	}
	if err := lead.SetDraining("n1", true); err != nil {
		t.Fatal(err)
	}
	sick.errs[1] = gpu.Sample{ECCErrors: 1}
	for range 2 {
		clock.t = clock.t.Add(lead.cfg.Interval)
		mustPass(t, lead)
	}
	if !lead.unschedulable("n1") || !lead.gpuUnhealthy("n0", 1) {
		t.Errorf("after re-reads: n1 unschedulable %v, n0/1 unhealthy %v; want both kept",
			lead.unschedulable("n1"), lead.gpuUnhealthy("n0", 1))
	}
}

// racingStore runs hook once, just after a read of the machines' state.
type racingStore struct {
	*memStore
	hook func()
}

func (s *racingStore) NodeStates(ctx context.Context) (NodeStates, error) {
	st, err := s.memStore.NodeStates(ctx)
	if h := s.hook; h != nil {
		s.hook = nil
		h()
	}
	return st, err
}

func TestReReadDoesNotUndoTheLeadersOwnWriteMadeMeanwhile(t *testing.T) {
	mem := newMemStore()
	store := &racingStore{memStore: mem}
	e, clock := newTestEngine(t, mem, newFakeNode("n1", 1))
	e.cfg.Store = store
	if err := e.loadNodeStates(context.Background()); err != nil {
		t.Fatal(err)
	}
	// An admin cordons n1 on the leader while its pass reads the store:
	// the read misses the cordon, and must not undo it.
	store.hook = func() {
		if err := e.SetCordoned("n1", true); err != nil {
			t.Error(err)
		}
	}
	clock.t = clock.t.Add(e.cfg.Interval)
	mustPass(t, e)
	mustPass(t, e) // the read made again
	if !e.unschedulable("n1") {
		t.Error("a re-read that raced with the leader's cordon undid it")
	}
}
