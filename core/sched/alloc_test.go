package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/synergy"
)

// synergyNode is the Synergy paper's server: 8 GPUs, 24 cores, 500 GiB.
func synergyNode(name string) Node {
	n := Node{Name: name, CPUs: 24, MemMiB: 500 * 1024}
	for i := range 8 {
		n.GPUs = append(n.GPUs, GPU{Index: i, MemMiB: 32 * 1024})
	}
	return n
}

func onNode(node string, from, n int) []gpu.Ref {
	var out []gpu.Ref
	for i := from; i < from+n; i++ {
		out = append(out, gpu.Ref{Node: node, Index: i})
	}
	return out
}

func allocOf(t *testing.T, d Decisions, id int64) Allocation {
	t.Helper()
	for _, a := range d.Allocations {
		if a.JobID == id {
			return a
		}
	}
	t.Fatalf("no allocation for job %d in %+v", id, d.Allocations)
	return Allocation{}
}

func TestAllocationStep(t *testing.T) {
	// A language job runs on half of node a; an image job starts on the
	// other half.
	snap := func() Snapshot {
		return Snapshot{Now: 100, Nodes: []Node{synergyNode("a"), synergyNode("b")}, Jobs: []Job{
			{ID: 1, GPUs: 4, Model: "bert-large", State: Running, Placement: onNode("a", 0, 4), SubmitTime: 0},
			{ID: 2, GPUs: 4, Model: "resnet50", SubmitTime: 50},
		}}
	}
	flat := synergy.Profile{Family: "mine"}
	tests := []struct {
		name     string
		mode     string
		edit     func(*Snapshot)
		wantCPU  map[int64]int64 // exact, or -1 for "more than proportional"
		wantNone bool
	}{
		{name: "default is proportional", mode: "", wantCPU: map[int64]int64{1: 12000, 2: 12000}},
		{name: "proportional", mode: AllocProportional, wantCPU: map[int64]int64{1: 12000, 2: 12000}},
		// The language job keeps what keeps its speed (1 core per GPU);
		// the image job takes the rest.
		{name: "synergy moves cores to the image job", mode: AllocSynergy, wantCPU: map[int64]int64{1: 4000, 2: 20000}},
		{name: "a request is a floor", mode: AllocSynergy,
			edit:    func(s *Snapshot) { s.Jobs[0].CPUMilli = 10000 },
			wantCPU: map[int64]int64{1: 10000, 2: 14000}},
		{name: "a declared profile wins over the model", mode: AllocSynergy,
			edit:    func(s *Snapshot) { s.Jobs[1].CPUProfile = &flat },
			wantCPU: map[int64]int64{1: 4000, 2: 500}},
		{name: "an unknown model keeps its share", mode: AllocSynergy,
			edit:    func(s *Snapshot) { s.Jobs[0].Model = "mystery" },
			wantCPU: map[int64]int64{1: 12000, 2: 12000}},
		{name: "nodes without CPUs are skipped", mode: AllocSynergy, wantNone: true,
			edit: func(s *Snapshot) { s.Nodes[0].CPUs, s.Nodes[0].MemMiB = 0, 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc := mustNew(t, Config{Policy: "fifo", CPUAlloc: tc.mode})
			s := snap()
			if tc.edit != nil {
				tc.edit(&s)
			}
			d := sc.Schedule(s)
			if len(d.Starts) != 1 || d.Starts[0].JobID != 2 || d.Starts[0].GPUs[0].Node != "a" {
				t.Fatalf("starts %+v, want job 2 on node a", d.Starts)
			}
			if tc.wantNone {
				if len(d.Allocations) != 0 {
					t.Fatalf("allocations %+v, want none", d.Allocations)
				}
				return
			}
			if len(d.Allocations) != 2 {
				t.Fatalf("allocations %+v, want both jobs of node a", d.Allocations)
			}
			for id, want := range tc.wantCPU {
				a := allocOf(t, d, id)
				if a.CPUMilli != want {
					t.Errorf("job %d: %d milli-CPUs, want %d (%s)", id, a.CPUMilli, want, a.Reason)
				}
				if a.Node != "a" || a.GPUs != 4 || a.PropCPUMilli != 12000 || a.PropMemMiB != 250*1024 {
					t.Errorf("job %d: %+v: want 4 GPUs on a, proportional 12 cores and 250 GiB", id, a)
				}
			}
		})
	}
}

func TestAllocationCountModeAndBadMode(t *testing.T) {
	if _, err := New(Config{Policy: "fifo", CPUAlloc: "greedy"}); err == nil {
		t.Fatal("unknown CPU allocation accepted")
	}
	sc := mustNew(t, Config{Policy: "fifo", Placement: PlaceCount, CPUAlloc: AllocSynergy})
	d := sc.Schedule(Snapshot{Nodes: []Node{synergyNode("a")}, Jobs: []Job{{ID: 1, GPUs: 2, Model: "resnet50"}}})
	if len(d.Starts) != 1 || len(d.Allocations) != 0 {
		t.Fatalf("count mode: starts %+v, allocations %+v; want a start and no allocation", d.Starts, d.Allocations)
	}
}

// TestAllocationProperties: over random clusters and jobs, allocations
// never exceed a node's CPUs or memory, never leave a job slower than its
// proportional share, cover every GPU a started job holds, and do not
// depend on the order of the snapshot's jobs.
func TestAllocationProperties(t *testing.T) {
	models := []string{"resnet50", "bert", "deepspeech2", "dlrm", "unknown", ""}
	rng := rand.New(rand.NewPCG(10, 10))
	for _, mode := range CPUAllocModes() {
		sc := mustNew(t, Config{Policy: "tiresias-l", CPUAlloc: mode})
		for iter := range 200 {
			s := randomAllocSnapshot(rng, models)
			d := sc.Schedule(s)
			caps := map[string]Node{}
			for _, n := range s.Nodes {
				caps[n.Name] = n
			}
			usedCPU, usedMem := map[string]int64{}, map[string]int64{}
			for _, a := range d.Allocations {
				usedCPU[a.Node] += a.CPUMilli
				usedMem[a.Node] += a.MemMiB
				if a.Speed < a.PropSpeed-1e-9 {
					t.Fatalf("%s %d: job %d runs at %v, below its proportional %v", mode, iter, a.JobID, a.Speed, a.PropSpeed)
				}
				if mode == AllocProportional && (a.CPUMilli != a.PropCPUMilli || a.MemMiB != a.PropMemMiB) {
					t.Fatalf("%s %d: job %d: %+v is not its proportional share", mode, iter, a.JobID, a)
				}
			}
			for name, c := range usedCPU {
				if n := caps[name]; c > int64(n.CPUs)*1000 || usedMem[name] > n.MemMiB {
					t.Fatalf("%s %d: node %s handed out %d milli-CPUs and %d MiB of %d and %d", mode, iter, name, c, usedMem[name], n.CPUs*1000, n.MemMiB)
				}
			}
			for _, st := range d.Starts {
				gpus := 0
				for _, a := range d.Allocations {
					if a.JobID == st.JobID {
						gpus += a.GPUs
					}
				}
				if gpus != len(st.GPUs) {
					t.Fatalf("%s %d: job %d started on %d GPUs, allocated on %d", mode, iter, st.JobID, len(st.GPUs), gpus)
				}
			}
			shuffled := s
			shuffled.Jobs = slices.Clone(s.Jobs)
			rng.Shuffle(len(shuffled.Jobs), func(a, b int) { shuffled.Jobs[a], shuffled.Jobs[b] = shuffled.Jobs[b], shuffled.Jobs[a] })
			if other := sc.Schedule(shuffled); fmt.Sprint(other.Allocations) != fmt.Sprint(d.Allocations) {
				t.Fatalf("%s %d: allocations depend on job order:\n%v\n%v", mode, iter, d.Allocations, other.Allocations)
			}
		}
	}
}

// randomAllocSnapshot makes 1 to 4 nodes of 2 to 8 GPUs with various CPUs
// and memory, some running jobs packed onto them and some pending.
func randomAllocSnapshot(rng *rand.Rand, models []string) Snapshot {
	var s Snapshot
	s.Now = 1000
	free := map[string][]int{}
	for i := range 1 + rng.IntN(4) {
		n := Node{Name: fmt.Sprintf("n%d", i), CPUs: 4 + rng.IntN(96), MemMiB: int64(16+rng.IntN(1024)) * 1024}
		for g := range 2 + rng.IntN(7) {
			n.GPUs = append(n.GPUs, GPU{Index: g})
			free[n.Name] = append(free[n.Name], g)
		}
		s.Nodes = append(s.Nodes, n)
	}
	id := int64(1)
	for _, n := range s.Nodes {
		for len(free[n.Name]) > 0 && rng.IntN(3) > 0 {
			k := 1 + rng.IntN(len(free[n.Name]))
			j := Job{ID: id, GPUs: k, State: Running, Model: models[rng.IntN(len(models))], SubmitTime: float64(id), LastStartTime: 500}
			for _, g := range free[n.Name][:k] {
				j.Placement = append(j.Placement, gpu.Ref{Node: n.Name, Index: g})
			}
			free[n.Name] = free[n.Name][k:]
			if rng.IntN(4) == 0 {
				j.CPUMilli = int64(rng.IntN(8000))
				j.MemMiB = int64(rng.IntN(64 * 1024))
			}
			s.Jobs = append(s.Jobs, j)
			id++
		}
	}
	for range rng.IntN(6) {
		s.Jobs = append(s.Jobs, Job{ID: id, GPUs: 1 + rng.IntN(8), Model: models[rng.IntN(len(models))], SubmitTime: float64(id)})
		id++
	}
	return s
}
