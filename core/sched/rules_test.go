package sched

import (
	"math"
	"testing"
)

// TestPreemptedFirst checks tiresias-l's rules over two passes: a job
// preempted in the first goes back ahead of a job that entered its queue
// earlier and was already waiting, and starts first in the second, under
// preempted-first and the reference's rules. Under queue-entry the
// earlier entrant starts.
func TestPreemptedFirst(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		start int64 // who starts in the second pass
	}{
		{"preempted-first: the just-preempted job goes first", Config{}, 1},
		{"reference: the just-preempted job goes first", Config{Reference: true}, 1},
		{"queue-entry: the earlier entrant goes first", Config{Rule: "queue-entry"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Policy = "tiresias-l"
			sc := mustNew(t, cfg)
			queueEntry := sc.Rule() == "queue-entry"
			jobs := []Job{
				run(1, 0, on("node-0", 0), served(4000), inQueue(1, 1000)), // queue 1 since 1000
				pend(2, 1, 0, served(3500), inQueue(1, 500)),               // queue 1 since 500, waiting
				pend(3, 1, 4900),                                           // queue 0
			}
			d := sc.Schedule(Snapshot{Now: 5000, Nodes: nodes(1), Jobs: jobs})
			if !sameIDs(startIDs(d), []int64{3}) || !sameIDs(preemptIDs(d), []int64{1}) {
				t.Fatalf("first pass: starts %v, preempts %v; want 3 for 1", startIDs(d), preemptIDs(d))
			}
			state := jobs[0].Queue
			for _, qc := range d.QueueChanges {
				if qc.JobID == 1 {
					state = qc.State
					if queueEntry || qc.From != 1 || qc.To != 1 || !(qc.State.Since < 500) {
						t.Errorf("queue change %+v", qc)
					}
				}
			}
			if !queueEntry && state == jobs[0].Queue {
				t.Fatalf("no queue change for the preempted job: %+v", d.QueueChanges)
			}
			// Job 3 finishes; one GPU frees.
			jobs[0].State, jobs[0].Placement, jobs[0].Queue = Pending, nil, state
			d = sc.Schedule(Snapshot{Now: 6000, Nodes: nodes(1), Jobs: jobs[:2]})
			if !sameIDs(startIDs(d), []int64{c.start}) {
				t.Errorf("second pass: starts %v, want %d", startIDs(d), c.start)
			}
		})
	}
}

// TestTiresiasGFullIndex checks tiresias-g's full index in the pass.
func TestTiresiasGFullIndex(t *testing.T) {
	// With samples 100, 200, 1000, best over every quantum:
	//   G(0)   = max(1/300, 2/500, 3/1300) = 1/250
	//   G(100) = max(1/200, 2/1000)        = 1/200
	//   G(200) = 1/800, G(300) = 1/700: the one-quantum index of 150 is 0
	//   for both, and ties them.
	dist := NewGPUTimeDist([]float64{100, 200, 1000})
	cfg := Config{Thresholds: []float64{1e9}, GittinsQuantum: 150}
	ref := cfg
	ref.Rule = "one-quantum"
	tail := []Job{pend(1, 1, 0, served(200)), pend(2, 1, 5, served(300))}
	runPolicyCases(t, "tiresias-g", []policyCase{{
		name: "in the sparse tail the job nearer the largest sample goes first", cfg: cfg,
		now: 1000, nodes: nodes(1), dist: dist, jobs: tail, starts: []int64{2},
	}, {
		name: "one-quantum: the tail ties, and the earlier job goes first", cfg: ref,
		now: 1000, nodes: nodes(1), dist: dist, jobs: tail, starts: []int64{1},
	}, {
		name:  "a pending job with a higher index preempts a running one",
		cfg:   cfg,
		now:   1000,
		nodes: nodes(1),
		dist:  dist,
		jobs: []Job{
			run(1, 0, on("node-0", 0), served(200)),
			pend(2, 1, 5, served(100)),
		},
		starts:   []int64{2},
		preempts: []int64{1},
		check: func(t *testing.T, d Decisions) {
			want := "preempted for job 2 (queue 0, Gittins index 0.005), which ranks above it (queue 0, Gittins index 0.00125)"
			if d.Preempts[0].Reason != want {
				t.Errorf("reason %q, want %q", d.Preempts[0].Reason, want)
			}
		},
	}})
}

// TestFullIndex checks GPUTimeDist.FullIndex against the one-quantum
// index over a fine grid of quanta: never below any, and equal to the
// best quantum ending on a sample.
func TestFullIndex(t *testing.T) {
	d := PriorGPUTimeDist()
	for _, a := range []float64{0, 1, 100, 3250, 7200, 20000, 1e5, 1e6, 1e9} {
		full := d.FullIndex(a)
		best := 0.0
		for _, v := range d.sorted {
			if v > a {
				best = max(best, d.Index(a, v-a))
			}
		}
		if math.Abs(full-best) > 1e-12*max(best, 1e-300) {
			t.Errorf("FullIndex(%v) = %v, best quantum on a sample gives %v", a, full, best)
		}
		for delta := 1.0; delta < 1e8; delta *= 1.3 {
			if g := d.Index(a, delta); g > full*(1+1e-12) {
				t.Errorf("FullIndex(%v) = %v below Index(%v, %v) = %v", a, full, a, delta, g)
			}
		}
	}
	if g := d.FullIndex(math.Inf(1)); g != 0 {
		t.Errorf("beyond every sample: %v, want 0", g)
	}
	var empty *GPUTimeDist
	if g := empty.FullIndex(0); g != 0 {
		t.Errorf("empty: %v, want 0", g)
	}
}
