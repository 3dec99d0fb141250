package sim

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// scripted is a scheduler that answers every pass with the same
// decisions, to see how the simulator treats a misbehaving core.
type scripted struct {
	d func(sched.Snapshot) sched.Decisions
}

func (s scripted) Schedule(snap sched.Snapshot) sched.Decisions { return s.d(snap) }

func TestRejectsBadDecisions(t *testing.T) {
	at := func(i int) gpu.Ref { return gpu.Ref{Node: "node-0", Index: i} }
	startAll := func(snap sched.Snapshot) sched.Decisions {
		var d sched.Decisions
		for i, j := range snap.Jobs {
			if j.State == sched.Pending {
				d.Starts = append(d.Starts, sched.Start{JobID: j.ID, GPUs: []gpu.Ref{at(i)}})
			}
		}
		return d
	}
	cases := []struct {
		name string
		d    func(sched.Snapshot) sched.Decisions
		want string
	}{
		{"unknown job", func(sched.Snapshot) sched.Decisions {
			return sched.Decisions{Starts: []sched.Start{{JobID: 99}}}
		}, "names job 99, which is not in the snapshot"},
		{"start twice", func(snap sched.Snapshot) sched.Decisions {
			return sched.Decisions{Starts: []sched.Start{{JobID: 1, GPUs: []gpu.Ref{at(0)}}, {JobID: 1, GPUs: []gpu.Ref{at(1)}}}}
		}, "starts job 1, which is already running"},
		{"preempt a waiting job", func(sched.Snapshot) sched.Decisions {
			return sched.Decisions{Preempts: []sched.Preempt{{JobID: 1}}}
		}, "preempts job 1, which is not running"},
		{"one GPU for two jobs", func(snap sched.Snapshot) sched.Decisions {
			d := startAll(snap)
			for i := range d.Starts {
				d.Starts[i].GPUs = []gpu.Ref{at(0)}
			}
			return d
		}, "GPU node-0/0 is already held"},
		{"a GPU that does not exist", func(snap sched.Snapshot) sched.Decisions {
			d := startAll(snap)
			d.Starts[0].GPUs = []gpu.Ref{{Node: "node-9", Index: 0}}
			return d
		}, "GPU node-9/0 does not exist"},
		{"wrong GPU count", func(snap sched.Snapshot) sched.Decisions {
			d := startAll(snap)
			d.Starts[0].GPUs = append(d.Starts[0].GPUs, at(3))
			return d
		}, "given 2 GPUs for a job of 1"},
		{"recheck in the past", func(snap sched.Snapshot) sched.Decisions {
			d := startAll(snap)
			d.Recheck = snap.Now - 1
			return d
		}, "recheck in the past"},
	}
	jobs := []trace.Job{gj(1, 10, 1, 5), gj(2, 10, 1, 5)}
	nodes, _ := trace.ParseClusterSpec("1x4")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := newSimulator(jobs, Config{Sched: sched.Config{Policy: "fifo"}, Nodes: nodes})
			if err != nil {
				t.Fatal(err)
			}
			s.sc = scripted{c.d}
			err = s.loop(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestIdleSchedulerEnds checks that a scheduler that never starts a job
// ends the run (with nothing finished) instead of spinning.
func TestIdleSchedulerEnds(t *testing.T) {
	nodes, _ := trace.ParseClusterSpec("1x4")
	s, err := newSimulator([]trace.Job{gj(1, 0, 1, 5)}, Config{Sched: sched.Config{Policy: "fifo"}, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	s.sc = scripted{func(sched.Snapshot) sched.Decisions { return sched.Decisions{} }}
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := s.result(); r.Finished != 0 || r.Jobs != 1 {
		t.Fatalf("finished %d of %d", r.Finished, r.Jobs)
	}
}

func TestRunRefuses(t *testing.T) {
	nodes, _ := trace.ParseClusterSpec("1x4")
	cases := []struct {
		name string
		jobs []trace.Job
		cfg  Config
		want string
	}{
		{"job larger than the cluster", []trace.Job{gj(1, 0, 8, 5)}, Config{Sched: sched.Config{Policy: "fifo"}, Nodes: nodes},
			"job 1 needs 8 GPUs; the cluster has 4"},
		{"duplicate job id", []trace.Job{gj(1, 0, 1, 5), gj(1, 3, 1, 5)}, Config{Sched: sched.Config{Policy: "fifo"}, Nodes: nodes},
			"job id 1 appears twice"},
		{"negative preempt cost", []trace.Job{gj(1, 0, 1, 5)}, Config{Sched: sched.Config{Policy: "fifo"}, Nodes: nodes, PreemptCostS: -1},
			"preempt cost -1"},
		{"unknown policy", []trace.Job{gj(1, 0, 1, 5)}, Config{Sched: sched.Config{Policy: "lottery"}, Nodes: nodes},
			`unknown policy "lottery"`},
		{"negative submit time", []trace.Job{gj(1, -1, 1, 5)}, Config{Sched: sched.Config{Policy: "fifo"}, Nodes: nodes},
			"job 1: submit -1 s"},
		{"NaN duration", []trace.Job{gj(1, 0, 1, math.NaN())}, Config{Sched: sched.Config{Policy: "fifo"}, Nodes: nodes},
			"want finite times"},
		{"no GPUs", []trace.Job{gj(1, 0, 1, 5)}, Config{Sched: sched.Config{Policy: "fifo"}},
			"the cluster has no GPUs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Run(context.Background(), c.jobs, c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	nodes, _ := trace.ParseClusterSpec("1x4")
	_, err := Run(ctx, []trace.Job{gj(1, 0, 1, 5)}, Config{Sched: sched.Config{Policy: "fifo"}, Nodes: nodes})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// TestCompareKeepsOrder checks that Compare returns one result per
// policy, in the order asked, over the same jobs.
func TestCompareKeepsOrder(t *testing.T) {
	nodes, _ := trace.ParseClusterSpec("1x4")
	jobs := []trace.Job{gj(1, 0, 3, 100), gj(2, 10, 2, 50), gj(3, 20, 1, 30)}
	rs, err := Compare(context.Background(), jobs, Config{Nodes: nodes}, []string{"fjf", "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Policy != "fjf" || rs[1].Policy != "fifo" || rs[0].AvgJCT != 90 {
		t.Fatalf("got %+v", rs)
	}
}
