package sched

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
				pend(3, 1, 4900), // queue 0
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
	// The hull query against the scan, on random distributions with ties.
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 300 {
		samples := make([]float64, 1+rng.IntN(60))
		for k := range samples {
			samples[k] = math.Floor(math.Exp(rng.Float64() * 12))
		}
		r := NewGPUTimeDist(samples)
		for range 20 {
			a := math.Exp(rng.Float64()*13) - 1
			if got, want := r.FullIndex(a), r.fullIndexScan(a); math.Abs(got-want) > 1e-12*want {
				t.Fatalf("trial %d, samples %v, a %v: FullIndex %v, scan %v", trial, samples, a, got, want)
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

// TestReferenceListOrder checks the two rules of the Tiresias simulator's
// list per queue that the reference rule of tiresias-l adds to
// preempted-first.
func TestReferenceListOrder(t *testing.T) {
	startedAt := func(at float64) func(*Job) { return func(j *Job) { j.LastStartTime = at } }
	// Two running jobs in queue 1: A entered it later, B started later.
	recent := []Job{
		run(1, 0, on("node-0", 0), served(4000), inQueue(1, 150), startedAt(100)),
		run(2, 0, on("node-0", 1), served(4000), inQueue(1, 50), startedAt(200)),
		pend(3, 1, 900), // queue 0, no GPU free
	}
	// A running job reaches queue 1 in this pass; a job waits there.
	demoted := []Job{
		run(1, 0, on("node-0", 0), served(3250)),
		pend(2, 1, 0, served(4000), inQueue(1, 500)),
	}
	cases := []struct {
		name     string
		rule     string
		jobs     []Job
		gpus     int
		preempts []int64
		starts   []int64
	}{
		{"reference: the most recently started job is preempted first", RuleReference, recent, 2, []int64{2}, []int64{3}},
		{"preempted-first: the last to enter the queue is preempted first", "", recent, 2, []int64{1}, []int64{3}},
		{"reference: a job demoted in the pass goes behind its new queue", RuleReference, demoted, 1, []int64{1}, []int64{2}},
		{"preempted-first: a demoted job keeps running ahead of the waiting", "", demoted, 1, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := mustNew(t, Config{Policy: "tiresias-l", Rule: c.rule})
			d := sc.Schedule(Snapshot{Now: 1000, Nodes: nodes(c.gpus), Jobs: c.jobs})
			if !sameIDs(preemptIDs(d), c.preempts) || !sameIDs(startIDs(d), c.starts) {
				t.Errorf("preempts %v, starts %v; want %v, %v", preemptIDs(d), startIDs(d), c.preempts, c.starts)
			}
			if c.rule == RuleReference && len(c.jobs) == 2 {
				// The demoted victim stays at the back of queue 1: no
				// preempted-first move.
				for _, qc := range d.QueueChanges {
					if qc.JobID == 1 && (qc.To != 1 || qc.State.Since != 1000) {
						t.Errorf("queue change %+v, want queue 1 since 1000", qc)
					}
				}
			}
		})
	}
}

// TestLeastService checks the least-service rules: tiresias-l serves a
// queue's waiting jobs least served first; tiresias-g breaks the ties of
// the one-quantum index (0 in the sparse tail) the same way.
func TestLeastService(t *testing.T) {
	waiting := []Job{
		pend(1, 1, 0, served(5000), inQueue(1, 100)),
		pend(2, 1, 0, served(4000), inQueue(1, 200)),
	}
	runPolicyCases(t, "tiresias-l", []policyCase{{
		name: "tiresias-l least-service: the least-served waiting job goes first", cfg: Config{Rule: "least-service"},
		now: 1000, nodes: nodes(1), jobs: waiting, starts: []int64{2},
	}, {
		name: "tiresias-l preempted-first: queue entry among the waiting", cfg: Config{},
		now: 1000, nodes: nodes(1), jobs: waiting, starts: []int64{1},
	}})

	dist := NewGPUTimeDist([]float64{100, 200, 1000})
	jobs := []Job{pend(1, 1, 0, served(300)), pend(2, 1, 5, served(200))}
	runPolicyCases(t, "tiresias-g", []policyCase{{
		name: "least-service: the least-served job goes first", cfg: Config{Thresholds: []float64{1e9}, GittinsQuantum: 150, Rule: "least-service"},
		now: 1000, nodes: nodes(1), dist: dist, jobs: jobs, starts: []int64{2},
	}, {
		name: "one-quantum: the tie goes to the earlier job", cfg: Config{Thresholds: []float64{1e9}, GittinsQuantum: 150, Rule: "one-quantum"},
		now: 1000, nodes: nodes(1), dist: dist, jobs: jobs, starts: []int64{1},
	}})
}

// TestReferenceIndex checks the Tiresias simulator's tabulated index on
// samples 100, 200, 1000 with a quantum of 150 (per 10^6 GPU-s):
//
//	at 99:  P = round(2/3) = 0.66667, E = (100+200+150)//3 = 150: 4444.4667
//	at 199: P = 1/2, E = (200+150)//2 = 175: 2857.1429
//	at 999: nothing finishes (the last sample never does): 0
//
// TestTiresiasGFullBody checks the full-body rule: the full index below
// the last queue, the reference's table with the earliest submitted
// first in the last, each where the other rule would pick the other job.
func TestTiresiasGFullBody(t *testing.T) {
	// Samples 100, 200, 1000, quantum 150, one threshold at 150 (queue 1
	// is the last). Full index: G(0) = 1/250 < G(100) = 1/200, G(200) =
	// 1/800 < G(300) = 1/700. The reference's table (TestReferenceIndex):
	// 4444e-6 at 0 > 2857e-6 at 100, and 0 at both 200 and 300.
	dist := NewGPUTimeDist([]float64{100, 200, 1000})
	body := Config{Thresholds: []float64{150}, GittinsQuantum: 150, Rule: RuleFullBody}
	full, ref := body, body
	full.Rule, ref.Rule = "full-index", RuleReference
	head := []Job{pend(1, 1, 0), pend(2, 1, 5, served(100))}
	tail := []Job{pend(1, 1, 0, served(200)), pend(2, 1, 5, served(300))}
	runPolicyCases(t, "tiresias-g", []policyCase{
		{name: "full-body, queue 0: the higher full index goes first", cfg: body,
			now: 1000, nodes: nodes(1), dist: dist, jobs: head, starts: []int64{2}},
		{name: "reference, queue 0: the higher tabulated index goes first", cfg: ref,
			now: 1000, nodes: nodes(1), dist: dist, jobs: head, starts: []int64{1}},
		{name: "full-body, last queue: the table ties, the earlier submitted goes first", cfg: body,
			now: 1000, nodes: nodes(1), dist: dist, jobs: tail, starts: []int64{1}},
		{name: "full-index, last queue: the job nearer a sample goes first", cfg: full,
			now: 1000, nodes: nodes(1), dist: dist, jobs: tail, starts: []int64{2}},
		{name: "full-body, last queue: an earlier job of the same tabulated index preempts a running one", cfg: body,
			now: 1000, nodes: nodes(1), dist: dist,
			jobs:   []Job{run(2, 5, on("node-0", 0), served(300)), pend(1, 1, 0, served(200))},
			starts: []int64{1}, preempts: []int64{2}},
		{name: "full-body, queue 0 above the last: a new job preempts a job of the last queue", cfg: body,
			now: 1000, nodes: nodes(1), dist: dist,
			jobs:   []Job{run(1, 0, on("node-0", 0), served(300)), pend(2, 1, 900)},
			starts: []int64{2}, preempts: []int64{1}},
	})
}

// TestTiresiasGLevels checks the levels rule: the full index below the
// last queue; in the last, the lower level of attained service (levels a
// factor of 4 apart) first, the earliest submitted first within a level,
// each where full-body would pick the other job.
func TestTiresiasGLevels(t *testing.T) {
	// As TestTiresiasGFullBody: samples 100, 200, 1000, quantum 150, one
	// threshold at 150. Levels: 200 is level 3 (64 to 256), 300 and 1000
	// level 4 (256 to 1024), 1100 level 5. The reference's table is 0 at
	// all of them, so full-body orders them by submission alone.
	dist := NewGPUTimeDist([]float64{100, 200, 1000})
	levels := Config{Thresholds: []float64{150}, GittinsQuantum: 150, Rule: RuleLevels}
	body := levels
	body.Rule = RuleFullBody
	lower := []Job{pend(1, 1, 0, served(300)), pend(2, 1, 5, served(200))}
	same := []Job{pend(1, 1, 0, served(1000)), pend(2, 1, 5, served(300))}
	runPolicyCases(t, "tiresias-g", []policyCase{
		{name: "levels, queue 0: the higher full index goes first", cfg: levels,
			now: 1000, nodes: nodes(1), dist: dist,
			jobs: []Job{pend(1, 1, 0), pend(2, 1, 5, served(100))}, starts: []int64{2}},
		{name: "levels, last queue: the lower level goes first, though submitted later", cfg: levels,
			now: 1000, nodes: nodes(1), dist: dist, jobs: lower, starts: []int64{2}},
		{name: "full-body, last queue: the table ties, the earlier submitted goes first", cfg: body,
			now: 1000, nodes: nodes(1), dist: dist, jobs: lower, starts: []int64{1}},
		{name: "levels, last queue: within a level the earlier submitted goes first, though it attained more", cfg: levels,
			now: 1000, nodes: nodes(1), dist: dist, jobs: same, starts: []int64{1}},
		{name: "levels, last queue: a job of a lower level preempts one of a higher level", cfg: levels,
			now: 2000, nodes: nodes(1), dist: dist,
			jobs:   []Job{run(1, 0, on("node-0", 0), served(1100)), pend(2, 1, 900, served(200))},
			starts: []int64{2}, preempts: []int64{1},
			check: func(t *testing.T, d Decisions) {
				if len(d.Preempts) != 1 || !strings.Contains(d.Preempts[0].Reason, "service level 5") {
					t.Errorf("preemption %+v: the reason names the running job's level", d.Preempts)
				}
			}},
		{name: "levels, last queue: a later job of the same level does not preempt", cfg: levels,
			now: 2000, nodes: nodes(1), dist: dist,
			jobs:   []Job{run(1, 0, on("node-0", 0), served(1000)), pend(2, 1, 900, served(300))},
			starts: nil, preempts: nil},
		{name: "levels, queue 0 above the last: a new job preempts a job of the last queue", cfg: levels,
			now: 1000, nodes: nodes(1), dist: dist,
			jobs:   []Job{run(1, 0, on("node-0", 0), served(300)), pend(2, 1, 900)},
			starts: []int64{2}, preempts: []int64{1}},
	})
}

// TestTiresiasGLevelsTable checks the levels-table rule: the full index
// below the last queue; in the last, levels of attained service (as
// levels) below levelsTableBound GPU-s, the reference's table at or
// above it, every job below the bound first; each case where levels or
// full-body would pick the other job.
func TestTiresiasGLevelsTable(t *testing.T) {
	// Samples 100, 200, 400,000, 500,000 and 2,000,000, quantum 150, one
	// threshold at 150 (queue 1 is the last). The reference's table is
	// 2.498e-6 below 400,000 GPU-s (P = 1/3, E = (400,000 + 2 x 150) // 3)
	// and 1.999e-6 from there to 500,000 (P = 1/2, E = (500,000 + 150) //
	// 2): it ties 200 and 300 and 300,000 and 360,000. Levels: 200 is
	// level 3, 300 and 1,000 level 4, 300,000 to 1,048,575 level 9.
	dist := NewGPUTimeDist([]float64{100, 200, 400_000, 500_000, 2_000_000})
	lt := Config{Thresholds: []float64{150}, GittinsQuantum: 150, Rule: RuleLevelsTable}
	levels, body := lt, lt
	levels.Rule, body.Rule = RuleLevels, RuleFullBody
	lower := []Job{pend(1, 1, 0, served(300)), pend(2, 1, 5, served(200))}
	same := []Job{pend(1, 1, 0, served(1000)), pend(2, 1, 5, served(300))}
	bound := []Job{pend(1, 1, 0, served(360_000)), pend(2, 1, 5, served(300_000))}
	table := []Job{pend(1, 1, 0, served(450_000)), pend(2, 1, 5, served(360_000))}
	cases := []policyCase{
		{name: "queue 0: the higher full index goes first", cfg: lt,
			jobs: []Job{pend(1, 1, 0), pend(2, 1, 5, served(100))}, starts: []int64{2}},
		{name: "below the bound: the lower level goes first, though submitted later", cfg: lt,
			jobs: lower, starts: []int64{2}},
		{name: "full-body on the same jobs: the table ties, the earlier submitted", cfg: body,
			jobs: lower, starts: []int64{1}},
		{name: "below the bound: within a level the earlier submitted, though it attained more", cfg: lt,
			jobs: same, starts: []int64{1}},
		{name: "across the bound: the job below it goes first, though submitted later", cfg: lt,
			jobs: bound, starts: []int64{2}},
		{name: "levels on the same jobs: one level, the earlier submitted", cfg: levels,
			jobs: bound, starts: []int64{1}},
		{name: "full-body on the same jobs: the table ties, the earlier submitted", cfg: body,
			jobs: bound, starts: []int64{1}},
		{name: "above the bound: the higher tabulated index goes first, though submitted later", cfg: lt,
			jobs: table, starts: []int64{2}},
		{name: "levels on the same jobs: one level, the earlier submitted", cfg: levels,
			jobs: table, starts: []int64{1}},
		{name: "above the bound: a job of a higher index preempts a running one", cfg: lt,
			jobs:   []Job{run(1, 0, on("node-0", 0), served(450_000)), pend(2, 1, 5, served(360_000))},
			starts: []int64{2}, preempts: []int64{1},
			check: func(t *testing.T, d Decisions) {
				if len(d.Preempts) != 1 || !strings.Contains(d.Preempts[0].Reason, "Gittins index 2e-06 (the reference's table)") {
					t.Errorf("preemption %+v: the reason names the running job's tabulated index", d.Preempts)
				}
			}},
		{name: "a job below the bound preempts one above it", cfg: lt,
			jobs:   []Job{run(1, 0, on("node-0", 0), served(360_000)), pend(2, 1, 5, served(1000))},
			starts: []int64{2}, preempts: []int64{1}},
		{name: "above the bound, equal indices: a later job does not preempt", cfg: lt,
			jobs:   []Job{run(1, 0, on("node-0", 0), served(360_000)), pend(2, 1, 5, served(380_000))},
			starts: nil, preempts: nil},
	}
	for i := range cases {
		cases[i].now, cases[i].nodes, cases[i].dist = 1e6, nodes(1), dist
	}
	runPolicyCases(t, "tiresias-g", cases)
}

// TestServiceLevel checks the levels of the last queue, exact at their
// bounds (powers of 4).
func TestServiceLevel(t *testing.T) {
	cases := []struct{ a, want float64 }{
		{0, 0}, {3.99, 0}, {4, 1}, {15.99, 1}, {16, 2}, {7200, 6}, {16384, 7}, {16383.99, 6},
		{math.Pow(4, 11), 11}, {math.Pow(4, 11) - 1, 10}, {53294624, 12}, {math.NaN(), 0}, {math.Inf(1), math.MaxInt32},
	}
	for _, c := range cases {
		if got := serviceLevel(c.a); got != c.want {
			t.Errorf("serviceLevel(%v) = %v, want %v", c.a, got, c.want)
		}
	}
	for k := range 30 {
		if got := serviceLevel(math.Pow(4, float64(k))); got != float64(k) {
			t.Errorf("serviceLevel(4^%d) = %v", k, got)
		}
	}
}

func TestReferenceIndex(t *testing.T) {
	d := NewGPUTimeDist([]float64{1000, 100, 200})
	cases := []struct{ a, want float64 }{
		{0, 4444.4667}, {99.5, 4444.4667}, {100, 2857.1429}, {150, 2857.1429},
		{200, 0}, {999, 0}, {1000, 0}, {5000, 0},
	}
	for _, c := range cases {
		if got := d.ReferenceIndex(c.a, 150); math.Abs(got*1e6-c.want) > 1e-6 {
			t.Errorf("ReferenceIndex(%v) = %v per 10^6, want %v", c.a, got*1e6, c.want)
		}
	}
	var empty *GPUTimeDist
	if g := empty.ReferenceIndex(0, 150); g != 0 {
		t.Errorf("empty: %v", g)
	}
}

// TestRules checks how Config.Rule and Config.Reference pick a rule.
func TestRules(t *testing.T) {
	cases := []struct {
		cfg  Config
		rule string // Scheduler.Rule
		err  string
	}{
		{Config{Policy: "tiresias-l"}, "preempted-first", ""},
		{Config{Policy: "tiresias-l", Rule: "queue-entry"}, "queue-entry", ""},
		{Config{Policy: "tiresias-l", Reference: true}, RuleReference, ""},
		{Config{Policy: "tiresias-l", Reference: true, Rule: RuleReference}, RuleReference, ""},
		{Config{Policy: "tiresias-g"}, "full-index", ""},
		{Config{Policy: "tiresias-g", Reference: true}, RuleReference, ""},
		{Config{Policy: "tiresias-g", Rule: "least-service"}, "least-service", ""},
		{Config{Policy: "fifo", Reference: true}, "", ""},
		{Config{Policy: "tiresias-l", Rule: "full-index"}, "", `unknown rule "full-index" for tiresias-l (known: preempted-first, queue-entry, least-service, reference)`},
		{Config{Policy: "fjf", Rule: "queue-entry"}, "", `policy fjf has one rule; rule "queue-entry" does not apply`},
		{Config{Policy: "tiresias-g", Reference: true, Rule: "one-quantum"}, "", `rule "one-quantum" and the reference rule both asked for tiresias-g`},
	}
	for _, c := range cases {
		sc, err := New(c.cfg)
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err {
				t.Errorf("%+v: error %v, want %q", c.cfg, err, c.err)
			}
		case err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case sc.Rule() != c.rule || sc.Config().Rule != c.rule:
			t.Errorf("%+v: rule %q (config %q), want %q", c.cfg, sc.Rule(), sc.Config().Rule, c.rule)
		default:
			if again, err := New(sc.Config()); err != nil || again.Rule() != c.rule {
				t.Errorf("%+v: the filled-in config gives %v, %v", c.cfg, again, err)
			}
		}
	}
	if got := PolicyRules("tiresias-g"); !slices.Equal(got, []string{"full-index", "one-quantum", "least-service", RuleReference, RuleFullBody, RuleLevels, RuleLevelsTable}) {
		t.Errorf("PolicyRules(tiresias-g) = %v", got)
	}
	if got := PolicyRules("fifo"); got != nil {
		t.Errorf("PolicyRules(fifo) = %v, want none", got)
	}
}
