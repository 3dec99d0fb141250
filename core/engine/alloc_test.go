package engine

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/synergy"
)

// usageNode is a fake machine that reports usage and takes resizes.
type usageNode struct {
	*fakeNode
	usage   []job.Usage
	resized map[int64]job.Resources
}

func (n *usageNode) JobUsage(time.Time) []job.Usage { return n.usage }
func (n *usageNode) Resize(_ context.Context, id int64, r job.Resources) error {
	n.resized[id] = r
	return nil
}

// notingStore records the notes the engine adds to jobs' histories and
// keeps measured profiles, and the CPUs each start was recorded with.
type notingStore struct {
	*memStore
	notes    map[int64][]string
	profiles []synergy.LearnedProfile
	given    map[int64]int64
}

func (s *notingStore) MarkStartedAll(ctx context.Context, starts []StartRecord, now time.Time) ([]int64, []error, error) {
	for _, st := range starts {
		if s.given == nil {
			s.given = map[int64]int64{}
		}
		s.given[st.JobID] = st.CPUs
	}
	return s.memStore.MarkStartedAll(ctx, starts, now)
}

func (s *notingStore) SaveCPUProfile(_ context.Context, p synergy.LearnedProfile) error {
	s.profiles = append(s.profiles, p)
	return nil
}

func (s *notingStore) CPUProfiles(context.Context) ([]synergy.LearnedProfile, error) {
	return s.profiles, nil
}

func (s *notingStore) AddJobNote(_ context.Context, id int64, note string, _ time.Time) error {
	s.notes[id] = append(s.notes[id], note)
	return nil
}

func newAllocEngine(t *testing.T, store Store, mode string, nodes ...Node) *Engine {
	t.Helper()
	sc, err := sched.New(sched.Config{Policy: "fifo", CPUAlloc: mode})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: t0}
	e, err := New(Config{Store: store, Scheduler: sc, Now: clock.now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.started = clock.t
	for _, n := range nodes {
		e.nodes[n.Name()] = n
	}
	return e
}

// TestEngineAllocates: the pass's allocations reach the agents in their
// specs, sensitive jobs get more CPUs under synergy, the job and node
// views report them with the use, an unenforced limit is noted once in
// the job's history, and a measured profile is learned for the model.
func TestEngineAllocates(t *testing.T) {
	store := &notingStore{memStore: newMemStore(
		Job{ID: 1, GPUs: 4, Model: "bert-base", SimDuration: 100, SubmittedAt: t0},
		Job{ID: 2, GPUs: 4, Model: "resnet50", BatchSize: 256, SimDuration: 100, SubmittedAt: t0.Add(time.Second)},
	), notes: map[int64][]string{}}
	n := &usageNode{fakeNode: newFakeNode("n0", 8), resized: map[int64]job.Resources{}}
	e := newAllocEngine(t, store, sched.AllocSynergy, n)
	mustPass(t, e)
	if len(n.starts) != 2 {
		t.Fatalf("starts %+v, want both jobs", n.starts)
	}
	res := map[int64]*job.Resources{}
	for _, s := range n.starts {
		if s.Resources == nil {
			t.Fatalf("job %d started without resources", s.JobID)
		}
		res[s.JobID] = s.Resources
	}
	// fakeNode: 32 cores and 256 GiB for 8 GPUs; proportional 16 cores each.
	if r1, r2 := res[1], res[2]; !(r2.CPUMilli > 16000 && r1.CPUMilli < 16000) || r1.CPUMilli+r2.CPUMilli > 32000 ||
		r1.PropCPUMilli != 16000 || r1.MemMiB+r2.MemMiB > 256<<10 {
		t.Errorf("resources bert %+v, resnet %+v: want cores moved to resnet within the node", r1, r2)
	}
	// The resnet job has no measured profile and there are no idle cores
	// left on the node: nothing to profile with.
	if res[2].ProfileMaxMilli != 0 {
		t.Errorf("profiling asked with no idle cores: %+v", res[2])
	}
	// Each start is recorded with the whole CPUs its job is told, which
	// sacct says of it once it has ended.
	for id, r := range res {
		if got, want := store.given[id], job.WholeCPUs(r.CPUMilli); got != want || want == 0 {
			t.Errorf("job %d's start was recorded with %d CPUs; it was told %d", id, got, want)
		}
	}
	na := e.NodeAllocations()["n0"]
	if na.Jobs != 2 || na.CPUMilli != res[1].CPUMilli+res[2].CPUMilli {
		t.Errorf("node allocation %+v", na)
	}

	n.usage = []job.Usage{
		{JobID: 1, CPUMilli: res[1].CPUMilli, UsedCPUMilli: 900, UsedMemMiB: 2000, Note: job.NotEnforcedPrefix + "no permission"},
		{JobID: 2, CPUMilli: res[2].CPUMilli, UsedCPUMilli: 20000, Enforced: true,
			Profile: []job.ProfilePoint{{CPUMilli: 12000, Rate: 50}, {CPUMilli: 24000, Rate: 100}}},
	}
	mustPass(t, e)
	mustPass(t, e)
	if got := store.notes[1]; len(got) != 1 || !strings.Contains(got[0], "no permission") || !strings.Contains(got[0], "n0") {
		t.Errorf("notes of job 1 = %q, want one saying why and where", got)
	}
	if len(store.notes[2]) != 0 {
		t.Errorf("job 2 is enforced, yet noted: %q", store.notes[2])
	}
	jr, ok := e.JobResources(2)
	if !ok || len(jr.Allocations) != 1 || len(jr.Usage) != 1 || jr.Usage[0].UsedCPUMilli != 20000 || jr.Usage[0].Node != "n0" {
		t.Fatalf("job resources %+v, %v", jr, ok)
	}
	// The measured curve is now the model's: history, not the catalogue.
	if jr.ProfileSource != synergy.SourceHistory || jr.Profile.Family != "measured" || jr.Profile.CPU.At(6) != 1 {
		t.Errorf("profile of job 2: %s %+v, want the measured one", jr.ProfileSource, jr.Profile)
	}
	if _, ok := e.JobResources(99); ok {
		t.Error("resources of an unknown job")
	}
	if p := store.profiles; len(p) != 1 || p[0].Model != "resnet50" || p[0].Batch != 256 || p[0].JobID != 2 {
		t.Fatalf("stored profiles %+v, want resnet50 at batch 256", p)
	}
	// A new engine (a restart) reads the stored profile: the next resnet
	// job is scheduled by it and not profiled again.
	store2 := &notingStore{memStore: newMemStore(Job{ID: 3, GPUs: 1, Model: "resnet50", BatchSize: 256, SimDuration: 100, SubmittedAt: t0}),
		notes: map[int64][]string{}, profiles: store.profiles}
	n2 := newFakeNode("n1", 8)
	e2 := newAllocEngine(t, store2, sched.AllocSynergy, n2)
	mustPass(t, e2)
	if len(n2.starts) != 1 || n2.starts[0].Resources == nil || n2.starts[0].Resources.ProfileMaxMilli != 0 {
		t.Fatalf("starts after restart %+v: want no profiling of a known model", n2.starts)
	}
	if got, want := store2.given[3], job.WholeCPUs(n2.starts[0].Resources.CPUMilli); got != want {
		t.Errorf("a pass's only start was recorded with %d CPUs; it was told %d", got, want)
	}
	if jr, _ := e2.JobResources(3); jr.ProfileSource != synergy.SourceHistory {
		t.Errorf("after restart the profile comes from %s, want history", jr.ProfileSource)
	}
}

// TestEngineProportionalAndProfileRequest: in proportional mode every job
// gets its share, and a job of unknown sensitivity on a node with idle
// cores is asked to be profiled up to them.
func TestEngineProportionalAndProfileRequest(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 2, Model: "resnet50", SimDuration: 100, SubmittedAt: t0})
	n := newFakeNode("n0", 8)
	e := newAllocEngine(t, store, sched.AllocProportional, n)
	mustPass(t, e)
	if len(n.starts) != 1 || n.starts[0].Resources == nil {
		t.Fatalf("starts %+v", n.starts)
	}
	if r := n.starts[0].Resources; r.CPUMilli != 8000 || r.MemMiB != 64<<10 || r.ProfileMaxMilli != 32000 {
		t.Errorf("resources %+v: want 8 cores, 64 GiB and profiling up to the node's 32 idle cores", r)
	}
}

// TestEngineReallocatesWhenAJobLeaves: when a job ends, the next pass
// gives its CPUs to the neighbours it left and resizes them.
func TestEngineReallocatesWhenAJobLeaves(t *testing.T) {
	store := newMemStore(
		Job{ID: 1, GPUs: 4, Model: "bert-base", SimDuration: 100, SubmittedAt: t0},
		Job{ID: 2, GPUs: 4, Model: "resnet50", SimDuration: 100, SubmittedAt: t0.Add(time.Second)},
	)
	n := &usageNode{fakeNode: newFakeNode("n0", 8), resized: map[int64]job.Resources{}}
	e := newAllocEngine(t, store, sched.AllocSynergy, n)
	mustPass(t, e)
	before, _ := e.JobResources(2)
	e.testExit(context.Background(), exit("n0", 1, 0, t0.Add(time.Minute)))
	delete(n.running, 1)
	mustPass(t, e)
	after, ok := e.JobResources(2)
	if !ok || len(after.Allocations) != 1 || after.Allocations[0].CPUMilli <= before.Allocations[0].CPUMilli {
		t.Fatalf("resnet before %+v, after %+v: want the cores bert left", before.Allocations, after.Allocations)
	}
	if r, ok := n.resized[2]; !ok || r.CPUMilli != after.Allocations[0].CPUMilli {
		t.Errorf("resizes %+v: want resnet resized to %d", n.resized, after.Allocations[0].CPUMilli)
	}
	if _, ok := e.JobResources(1); ok {
		t.Error("the finished job still has an allocation")
	}
	if na := e.NodeAllocations()["n0"]; na.Jobs != 1 {
		t.Errorf("node allocation %+v, want the one job left", na)
	}
}
