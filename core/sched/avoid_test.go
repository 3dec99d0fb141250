package sched

import (
	"slices"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

func avoiding(names ...string) func(*Job) { return func(j *Job) { j.AvoidNodes = names } }

// TestAvoidNodes: a job passes over the machines it avoids (its owner has
// no Unix account there), and only it does.
func TestAvoidNodes(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config
		nodes    []Node
		jobs     []Job
		starts   map[int64][]gpu.Ref // job -> placement; absent: waits
		preempts []int64
	}{{
		name:  "the best fit is passed over when avoided",
		nodes: nodes(4, 4),
		jobs:  []Job{busy(100, "node-0", 0, 3), pend(1, 1, 0, avoiding("node-0"))},
		// Best fit is node-0's last GPU; the job avoids it.
		starts: map[int64][]gpu.Ref{1: on("node-1", 0)},
	}, {
		name:   "the next job still sees the avoided machine",
		nodes:  nodes(4, 4),
		jobs:   []Job{busy(100, "node-0", 0, 3), pend(1, 1, 0, avoiding("node-0")), pend(2, 1, 1)},
		starts: map[int64][]gpu.Ref{1: on("node-1", 0), 2: on("node-0", 3)},
	}, {
		name:   "a job that avoids every machine waits, and under fifo blocks nobody",
		cfg:    Config{Policy: "fifo"},
		nodes:  nodes(4, 4),
		jobs:   []Job{pend(1, 1, 0, avoiding("node-0", "node-1")), pend(2, 2, 1)},
		starts: map[int64][]gpu.Ref{2: on("node-0", 0, 1)},
	}, {
		name:   "a job spanning machines spans only those it may use",
		nodes:  nodes(4, 4, 4),
		jobs:   []Job{pend(1, 8, 0, avoiding("node-1"))},
		starts: map[int64][]gpu.Ref{1: append(on("node-0", 0, 1, 2, 3), on("node-2", 0, 1, 2, 3)...)},
	}, {
		name:  "no preemption on an avoided machine",
		cfg:   Config{Policy: "tiresias-l"},
		nodes: nodes(8),
		jobs: []Job{
			run(1, 0, on("node-0", span(0, 8)...), served(1000), inQueue(2, 900)),
			pend(2, 8, 8000, avoiding("node-0")),
		},
	}, {
		name:  "preemption elsewhere spares the victim on the avoided machine",
		cfg:   Config{Policy: "tiresias-l"},
		nodes: nodes(8, 8),
		jobs: []Job{
			run(1, 0, on("node-0", span(0, 8)...), served(1000), inQueue(2, 800)),
			run(3, 0, on("node-1", span(0, 8)...), served(1000), inQueue(2, 900)),
			pend(2, 8, 8000, avoiding("node-0")),
		},
		preempts: []int64{3},
		starts:   map[int64][]gpu.Ref{2: on("node-1", span(0, 8)...)},
	}, {
		name:  "a sharing job joins no shared GPU on an avoided machine",
		nodes: shareNodes(1, 1),
		jobs: []Job{
			run(1, 0, on("node-0", 0), shares(2048, 2048)),
			run(3, 0, on("node-1", 0)),
			pend(2, 1, 10, shares(2048, 2048), avoiding("node-0")),
		},
	}, {
		name:  "a sharing job joins a shared GPU elsewhere",
		nodes: shareNodes(1, 1),
		jobs: []Job{
			run(1, 0, on("node-0", 0), shares(2048, 2048)),
			run(3, 0, on("node-1", 0), shares(2048, 2048)),
			pend(2, 1, 10, shares(2048, 2048), avoiding("node-0")),
		},
		starts: map[int64][]gpu.Ref{2: on("node-1", 0)},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.Policy == "" {
				cfg.Policy = "fifo"
			}
			sc := mustNew(t, cfg)
			d := sc.Schedule(Snapshot{Now: 9000, Nodes: tc.nodes, Jobs: tc.jobs})
			for _, j := range tc.jobs {
				if j.State != Pending {
					continue
				}
				st, started := startOf(d, j.ID)
				want, ok := tc.starts[j.ID]
				switch {
				case ok && !started:
					w, _ := waitOf(d, j.ID)
					t.Errorf("job %d waits (%s), want it on %v", j.ID, w.Reason, want)
				case !ok && started:
					t.Errorf("job %d starts on %v, want it to wait", j.ID, st.GPUs)
				case ok && !slices.Equal(st.GPUs, want):
					t.Errorf("job %d starts on %v, want %v", j.ID, st.GPUs, want)
				}
				for _, g := range st.GPUs {
					if slices.Contains(j.AvoidNodes, g.Node) {
						t.Errorf("job %d placed on %s, which it avoids", j.ID, g.Node)
					}
				}
			}
			if !sameIDs(preemptIDs(d), tc.preempts) {
				t.Errorf("preempts %v, want %v", preemptIDs(d), tc.preempts)
			}
		})
	}
}
