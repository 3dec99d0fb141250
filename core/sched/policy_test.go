package sched

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// policyCase is a hand-made scenario and the decisions derived by hand.
type policyCase struct {
	name     string
	cfg      Config // Policy is filled in by runPolicyCases
	now      float64
	nodes    []Node
	jobs     []Job
	dist     *GPUTimeDist
	teams    []Team
	starts   []int64
	preempts []int64
	waits    map[int64]WaitCause
	check    func(t *testing.T, d Decisions)
}

func runPolicyCases(t *testing.T, policy string, cases []policyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Policy = policy
			d := mustNew(t, cfg).Schedule(Snapshot{Now: c.now, Nodes: c.nodes, Jobs: c.jobs, GPUTimeDist: c.dist, Teams: c.teams})
			if !sameIDs(startIDs(d), c.starts) {
				t.Errorf("starts %v, want %v", startIDs(d), c.starts)
			}
			if !sameIDs(preemptIDs(d), c.preempts) {
				t.Errorf("preempts %v, want %v", preemptIDs(d), c.preempts)
			}
			for id, cause := range c.waits {
				w, ok := waitOf(d, id)
				if !ok || w.Cause != cause {
					t.Errorf("job %d: wait %+v (found %v), want cause %s", id, w, ok, cause)
				}
			}
			if c.check != nil {
				c.check(t, d)
			}
			if t.Failed() {
				t.Logf("decisions: %+v", d)
			}
		})
	}
}

func TestFIFO(t *testing.T) {
	runPolicyCases(t, "fifo", []policyCase{{
		name:  "the first job that does not fit blocks the jobs behind it",
		nodes: nodes(8),
		jobs: []Job{
			run(1, 0, on("node-0", 0, 1, 2, 3)),
			pend(2, 6, 1),
			pend(3, 2, 2),
		},
		waits: map[int64]WaitCause{2: WaitCapacity, 3: WaitBlocked},
		check: func(t *testing.T, d Decisions) {
			if w, _ := waitOf(d, 3); w.Position != 2 || !strings.Contains(w.Reason, "behind job 2") {
				t.Errorf("job 3: %+v", w)
			}
		},
	}, {
		name:   "jobs start in submit order, not in ID order",
		nodes:  nodes(8),
		jobs:   []Job{pend(4, 8, 2), pend(5, 8, 1)},
		starts: []int64{5},
		waits:  map[int64]WaitCause{4: WaitCapacity},
	}, {
		name:   "a job larger than the cluster blocks nobody",
		nodes:  nodes(4),
		jobs:   []Job{pend(1, 8, 0), pend(2, 2, 1)},
		starts: []int64{2},
		waits:  map[int64]WaitCause{1: WaitTooLarge},
	}, {
		name:  "running jobs are never preempted",
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", span(0, 4)...), served(1e5)),
			pend(2, 4, 1, lasting(10)),
		},
		waits: map[int64]WaitCause{2: WaitCapacity},
	}})
}

func TestFJF(t *testing.T) {
	runPolicyCases(t, "fjf", []policyCase{{
		name:  "a job that does not fit is skipped",
		nodes: nodes(8),
		jobs: []Job{
			run(1, 0, on("node-0", 0, 1, 2, 3)),
			pend(2, 6, 1),
			pend(3, 2, 2),
		},
		starts: []int64{3},
		waits:  map[int64]WaitCause{2: WaitCapacity},
		check: func(t *testing.T, d Decisions) {
			if s, _ := startOf(d, 3); len(s.GPUs) != 2 || s.GPUs[0] != (gpu.Ref{Node: "node-0", Index: 4}) || s.GPUs[1] != (gpu.Ref{Node: "node-0", Index: 5}) {
				t.Errorf("job 3 on %v, want node-0 GPUs 4 and 5", s.GPUs)
			}
		},
	}, {
		name:  "fitting jobs start in arrival order until the GPUs run out",
		nodes: nodes(8),
		jobs: []Job{
			run(1, 0, on("node-0", span(0, 6)...)),
			pend(2, 4, 1),
			pend(3, 2, 2),
			pend(4, 1, 3),
		},
		starts: []int64{3},
		waits:  map[int64]WaitCause{2: WaitCapacity, 4: WaitCapacity},
	}})
}

func TestSRTF(t *testing.T) {
	runPolicyCases(t, "srtf", []policyCase{{
		name:  "a job with less time remaining preempts a running one",
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", span(0, 4)...), lasting(1000), served(100)),
			pend(2, 4, 50, lasting(500)),
		},
		starts:   []int64{2},
		preempts: []int64{1},
		waits:    map[int64]WaitCause{1: WaitPreempted},
		check: func(t *testing.T, d Decisions) {
			want := "preempted for job 2 (500 s remaining), which ranks above it (900 s remaining)"
			if d.Preempts[0].Reason != want || d.Preempts[0].For != 2 {
				t.Errorf("preempt %+v, want reason %q", d.Preempts[0], want)
			}
		},
	}, {
		name:  "a job without a duration never preempts one with",
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", span(0, 4)...), lasting(1e6), served(100)),
			pend(2, 4, 50),
		},
		waits: map[int64]WaitCause{2: WaitCapacity},
	}, {
		name:  "a job with a duration preempts one without",
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", span(0, 4)...), served(100)),
			pend(2, 4, 50, lasting(1e6)),
		},
		starts:   []int64{2},
		preempts: []int64{1},
	}, {
		name:  "with equal time remaining the running job stays",
		nodes: nodes(4),
		jobs: []Job{
			run(1, 10, on("node-0", span(0, 4)...), lasting(600), served(100)),
			pend(2, 4, 5, lasting(500)),
		},
		waits: map[int64]WaitCause{2: WaitCapacity},
	}, {
		name:  "time counts, not GPUs",
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", 0), lasting(1000)),
			pend(2, 4, 1, lasting(400)),
		},
		starts:   []int64{2},
		preempts: []int64{1},
	}})
}

func TestSRSF(t *testing.T) {
	runPolicyCases(t, "srsf", []policyCase{{
		name:  "service counts GPUs: a 4-GPU job of 400 s ranks below a 1-GPU job of 1000 s",
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", 0), lasting(1000)),
			pend(2, 4, 1, lasting(400)),
			pend(3, 1, 2, lasting(100)),
		},
		starts: []int64{3},
		waits:  map[int64]WaitCause{2: WaitCapacity},
	}, {
		name:  "less service remaining preempts",
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", span(0, 4)...), lasting(1000)),
			pend(2, 2, 1, lasting(1000)),
		},
		starts:   []int64{2},
		preempts: []int64{1},
		check: func(t *testing.T, d Decisions) {
			want := "preempted for job 2 (2000 GPU-s remaining), which ranks above it (4000 GPU-s remaining)"
			if d.Preempts[0].Reason != want {
				t.Errorf("reason %q, want %q", d.Preempts[0].Reason, want)
			}
		},
	}})
}

func TestDLAS(t *testing.T) {
	runPolicyCases(t, "dlas", []policyCase{{
		name:  "a job leaves queue 0 once it has run 3,250 s",
		now:   5000,
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", 0, 1), served(3250)),
			run(2, 0, on("node-0", 2, 3), served(3249)),
		},
		check: func(t *testing.T, d Decisions) {
			want := []QueueChange{{JobID: 1, From: 0, To: 1, State: QueueState{Index: 1, Since: 5000},
				Reason: "demoted from queue 0 to queue 1: 3250 s executed reached queue 0's limit of 3250"}}
			if len(d.QueueChanges) != 1 || d.QueueChanges[0] != want[0] {
				t.Errorf("queue changes %+v, want %+v", d.QueueChanges, want)
			}
			// Job 2 reaches 3,250 s one second from now.
			if d.Recheck != 5001 {
				t.Errorf("recheck %v, want 5001", d.Recheck)
			}
		},
	}, {
		name:  "executed time decides, not GPU time",
		now:   5000,
		nodes: nodes(4),
		jobs:  []Job{run(1, 0, on("node-0", span(0, 4)...), served(1000))},
		check: func(t *testing.T, d Decisions) {
			if len(d.QueueChanges) != 0 {
				t.Errorf("queue changes %+v, want none", d.QueueChanges)
			}
		},
	}, {
		name:  "a new job preempts a demoted one",
		now:   5000,
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", span(0, 4)...), served(4000), inQueue(1, 3250)),
			pend(2, 4, 4900),
		},
		starts:   []int64{2},
		preempts: []int64{1},
	}})
}

func TestTiresiasL(t *testing.T) {
	full := on("node-0", span(0, 4)...)
	runPolicyCases(t, "tiresias-l", []policyCase{{
		name:  "a job leaves queue 0 at 3,250 GPU-seconds",
		now:   2000,
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, on("node-0", 0, 1), served(1625)),   // 3,250 GPU-s
			run(2, 0, on("node-0", 2, 3), served(1624.5)), // 3,249 GPU-s
		},
		check: func(t *testing.T, d Decisions) {
			if len(d.QueueChanges) != 1 || d.QueueChanges[0].JobID != 1 || d.QueueChanges[0].To != 1 ||
				d.QueueChanges[0].State != (QueueState{Index: 1, Since: 2000}) {
				t.Errorf("queue changes %+v, want job 1 to queue 1 since 2000", d.QueueChanges)
			}
			if d.Recheck != 2000.5 { // job 2: 1 GPU-s left at 2 GPUs
				t.Errorf("recheck %v, want 2000.5", d.Recheck)
			}
		},
	}, {
		name:  "a job crossing both thresholds lands in queue 2",
		now:   2000,
		nodes: nodes(8),
		jobs:  []Job{run(1, 0, on("node-0", span(0, 8)...), served(1000))}, // 8,000 GPU-s
		check: func(t *testing.T, d Decisions) {
			if len(d.QueueChanges) != 1 || d.QueueChanges[0].From != 0 || d.QueueChanges[0].To != 2 {
				t.Errorf("queue changes %+v, want 0 -> 2", d.QueueChanges)
			}
			if d.Recheck != 0 {
				t.Errorf("recheck %v, want none from the last queue", d.Recheck)
			}
		},
	}, {
		name:  "a queue's running jobs rank before its pending jobs",
		now:   100,
		nodes: nodes(4),
		jobs: []Job{
			run(1, 10, full, served(10)),
			pend(2, 4, 5),
		},
		waits: map[int64]WaitCause{2: WaitCapacity},
	}, {
		name:  "within a queue, jobs are served by queue-entry time",
		now:   5000,
		nodes: nodes(2),
		jobs: []Job{
			pend(1, 2, 0, served(2000), inQueue(1, 900)),
			pend(2, 2, 100, served(2000), inQueue(1, 500)),
		},
		starts: []int64{2},
		check: func(t *testing.T, d Decisions) {
			if w, _ := waitOf(d, 1); w.Queue != 1 || w.Position != 1 {
				t.Errorf("job 1 waits %+v, want first in queue 1", w)
			}
		},
	}, {
		name:  "a job of a higher queue preempts a job of a lower one",
		now:   1500,
		nodes: nodes(4),
		jobs: []Job{
			run(1, 0, full, served(1000), inQueue(1, 800)), // 4,000 GPU-s
			pend(2, 4, 1400),
		},
		starts:   []int64{2},
		preempts: []int64{1},
		check: func(t *testing.T, d Decisions) {
			want := "preempted for job 2 (queue 0, 0 GPU-s attained), which ranks above it (queue 1, 4000 GPU-s attained)"
			if d.Preempts[0].Reason != want {
				t.Errorf("reason %q, want %q", d.Preempts[0].Reason, want)
			}
			if s, _ := startOf(d, 2); len(s.GPUs) != 4 {
				t.Errorf("job 2 on %v", s.GPUs)
			}
		},
	}, {
		name:  "only the lowest-ranked job needed is preempted",
		now:   9000,
		nodes: nodes(8),
		jobs: []Job{
			run(1, 0, on("node-0", 0, 1, 2, 3), served(1000), inQueue(1, 3000)), // 4,000 GPU-s
			run(2, 0, on("node-0", 4, 5), served(4000), inQueue(2, 6000)),       // 8,000
			run(3, 0, on("node-0", 6, 7), served(5000), inQueue(2, 7000)),       // 10,000, entered last
			pend(4, 2, 8000),
		},
		starts:   []int64{4},
		preempts: []int64{3},
		check: func(t *testing.T, d Decisions) {
			if s, _ := startOf(d, 4); len(s.GPUs) != 2 || s.GPUs[0].Index != 6 || s.GPUs[1].Index != 7 {
				t.Errorf("job 4 on %v, want job 3's GPUs 6 and 7", s.GPUs)
			}
		},
	}, {
		name:   "a waiting job below queue 0 is promoted once it waited PROMOTEKNOB x its run",
		cfg:    Config{PromoteKnob: 2},
		now:    3100,
		nodes:  nodes(4),
		jobs:   []Job{pend(1, 4, 0, served(1000), inQueue(1, 1000))}, // waited 2,100 >= 2 x 1,000
		starts: []int64{1},
		check: func(t *testing.T, d Decisions) {
			want := QueueState{Index: 0, Since: 3100, CycleStart: 3100, CycleService: 4000, CycleExecuted: 1000, Promotions: 1}
			if len(d.QueueChanges) != 1 || d.QueueChanges[0].State != want || d.QueueChanges[0].From != 1 {
				t.Errorf("queue changes %+v, want promotion to %+v", d.QueueChanges, want)
			}
			// Once started, the new cycle demotes it after 3,250 GPU-s at 4 GPUs.
			if d.Recheck != 3100+3250.0/4 {
				t.Errorf("recheck %v, want %v", d.Recheck, 3100+3250.0/4)
			}
		},
	}, {
		name:  "before its time the job stays, and Recheck says when",
		cfg:   Config{PromoteKnob: 2},
		now:   2900,
		nodes: nodes(4),
		jobs: []Job{
			pend(1, 4, 0, served(1000), inQueue(1, 1000)), // waited 1,900 < 2,000
			run(2, 2800, full, served(100)),               // 400 GPU-s, queue 0
		},
		waits: map[int64]WaitCause{1: WaitCapacity},
		check: func(t *testing.T, d Decisions) {
			if len(d.QueueChanges) != 0 {
				t.Errorf("queue changes %+v, want none", d.QueueChanges)
			}
			if d.Recheck != 3000 {
				t.Errorf("recheck %v, want 3000 (promotion; demotion of job 2 is at 3612.5)", d.Recheck)
			}
		},
	}, {
		name:  "knob 0 never promotes",
		now:   1e6,
		nodes: nodes(4),
		jobs: []Job{
			pend(1, 4, 0, served(1000), inQueue(1, 1000)),
			run(2, 2800, full, served(100), inQueue(0, 0)),
		},
		check: func(t *testing.T, d Decisions) {
			if len(d.QueueChanges) != 0 {
				t.Errorf("queue changes %+v, want none", d.QueueChanges)
			}
		},
	}, {
		name:  "a promoted job goes down the queues afresh",
		now:   9000,
		nodes: nodes(4),
		jobs: []Job{run(1, 0, full, served(1250), func(j *Job) {
			j.Queue = QueueState{Index: 0, Since: 8000, CycleStart: 8000, CycleService: 4000, CycleExecuted: 1000, Promotions: 1}
		})}, // 5,000 GPU-s in all, 1,000 in this cycle
		check: func(t *testing.T, d Decisions) {
			if len(d.QueueChanges) != 0 {
				t.Errorf("queue changes %+v, want none", d.QueueChanges)
			}
			if d.Recheck != 9000+(3250-1000)/4.0 {
				t.Errorf("recheck %v", d.Recheck)
			}
		},
	}})
}

// TestTiresiasG checks tiresias-g's one-quantum rule: the index of one
// quantum.
func TestTiresiasG(t *testing.T) {
	// With samples 100, 200, 1000 and a quantum of 150:
	//   G(0)   = P(S <= 150)            / E[min(S, 150)]          = (1/3)/(400/3) = 1/400
	//   G(100) = P(S <= 250 | S > 100)  / E[min(S-100, 150) | ..] = (1/2)/(250/2) = 1/250
	//   G(200) = P(S <= 350 | S > 200)  / ...                      = 0
	dist := NewGPUTimeDist([]float64{100, 200, 1000})
	oneQueue := Config{Thresholds: []float64{1e9}, GittinsQuantum: 150, Rule: "one-quantum"}
	runPolicyCases(t, "tiresias-g", []policyCase{{
		name:  "within a queue the highest Gittins index goes first",
		cfg:   oneQueue,
		now:   1000,
		nodes: nodes(1),
		dist:  dist,
		jobs: []Job{
			pend(1, 1, 0),
			pend(2, 1, 5, served(100)),
			pend(3, 1, 1, served(200)),
		},
		starts: []int64{2},
		check: func(t *testing.T, d Decisions) {
			if w, _ := waitOf(d, 1); w.Position != 1 {
				t.Errorf("job 1 %+v, want position 1", w)
			}
			if w, _ := waitOf(d, 3); w.Position != 2 {
				t.Errorf("job 3 %+v, want position 2", w)
			}
		},
	}, {
		name:  "a pending job with a higher index preempts a running one",
		cfg:   oneQueue,
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
			want := "preempted for job 2 (queue 0, Gittins index 0.004), which ranks above it (queue 0, Gittins index 0)"
			if d.Preempts[0].Reason != want {
				t.Errorf("reason %q, want %q", d.Preempts[0].Reason, want)
			}
		},
	}, {
		name:  "queues come before indices",
		now:   10000,
		nodes: nodes(1),
		jobs: []Job{
			pend(1, 1, 0, served(5000), inQueue(1, 5000)), // queue 1
			pend(2, 1, 9000, served(3000)),                // queue 0
		},
		starts: []int64{2},
	}})
}

func TestGittinsConfigSamplesJoinThePrior(t *testing.T) {
	sc := mustNew(t, Config{Policy: "tiresias-g", GPUTimeSamples: []float64{1, 2, 3}})
	if got, want := sc.dist.Len(), PriorGPUTimeDist().Len()+3; got != want {
		t.Errorf("distribution has %d samples, want %d", got, want)
	}
}

func TestLimitsAsHints(t *testing.T) {
	limited := func(s float64) func(*Job) { return func(j *Job) { j.TimeLimitS = s } }
	hints := Config{LimitsAsHints: true}
	for _, policy := range []string{"srtf", "srsf"} {
		t.Run(policy, func(t *testing.T) {
			runPolicyCases(t, policy, []policyCase{{
				name:   "without the knob a limit is no duration: arrival order among unknowns",
				nodes:  nodes(1),
				jobs:   []Job{pend(1, 1, 1, limited(7200)), pend(2, 1, 2, limited(600))},
				starts: []int64{1},
			}, {
				name:   "the smaller bound on the work left goes first",
				cfg:    hints,
				nodes:  nodes(1),
				jobs:   []Job{pend(1, 1, 1, limited(7200)), pend(2, 1, 2, limited(600))},
				starts: []int64{2},
			}, {
				name:   "the bound is the limit less the time run, and preempts a looser one",
				cfg:    hints,
				nodes:  nodes(1),
				jobs:   []Job{run(1, 0, on("node-0", 0), limited(3600), served(100)), pend(2, 1, 5, limited(7200), served(7000))},
				starts: []int64{2}, preempts: []int64{1},
			}, {
				name:   "a known duration comes before the limit",
				cfg:    hints,
				nodes:  nodes(1),
				jobs:   []Job{pend(1, 1, 1, limited(300), lasting(5000)), pend(2, 1, 2, limited(9000), lasting(400))},
				starts: []int64{2},
			}, {
				name:   "a job with neither ranks after every job with a bound",
				cfg:    hints,
				nodes:  nodes(1),
				jobs:   []Job{pend(1, 1, 1), pend(2, 1, 2, limited(86400))},
				starts: []int64{2},
			}})
		})
	}
}

// TestMoveReason checks the reason of a queue move, built without fmt,
// against the sentence it stands for.
func TestMoveReason(t *testing.T) {
	thr := []float64{3250, 7200}
	p := &pass{sc: &Scheduler{thr: thr}, pol: &policy{queues: &serviceMeasure{unit: "GPU-seconds"}}}
	for _, c := range []struct {
		from, to int
		s        float64
	}{{0, 1, 3250}, {0, 2, 7200.4}, {1, 2, 1e16}, {2, 1, 4000.6}, {1, 0, 0}, {0, 1, math.NaN()}, {-1, 1, -3}} {
		want := fmt.Sprintf("moved from queue %d to queue %d: %s %s", c.from, c.to, fmtNum(c.s), "GPU-seconds")
		if c.to > c.from && c.to > 0 {
			want = fmt.Sprintf("demoted from queue %d to queue %d: %s %s reached queue %d's limit of %s",
				c.from, c.to, fmtNum(c.s), "GPU-seconds", c.to-1, fmtNum(thr[c.to-1]))
		}
		if got := p.moveReason(c.from, c.to, c.s); got != want {
			t.Errorf("moveReason(%d, %d, %v) = %q, want %q", c.from, c.to, c.s, got, want)
		}
	}
}
