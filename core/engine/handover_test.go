package engine

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// TestVictimsDoNotRetakeAPromisedGPU: a 4-GPU job in the top queue
// preempts two 2-GPU jobs on two machines. Their exits arrive one at a
// time; the first victim out must not start again on the GPUs it left
// (promised to the preemptor) while the second has yet to exit, or the
// preemptor preempts it again, and so on (seen in the demo: a job
// started and preempted 600 times in minutes).
func TestVictimsDoNotRetakeAPromisedGPU(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-2 * time.Minute)
	mem := newMemStore(
		Job{ID: 8, Team: "nlp", GPUs: 2, State: job.Running, Run: 1, Placement: on("n1", 0, 1), LastStartAt: &start, SubmittedAt: start,
			AttainedService: 250, Queue: sched.QueueState{Index: 1}},
		Job{ID: 28, Team: "nlp", GPUs: 2, State: job.Running, Run: 1, Placement: on("n0", 0, 1), LastStartAt: &start, SubmittedAt: start,
			AttainedService: 270, Queue: sched.QueueState{Index: 1}},
		Job{ID: 50, Team: "vision", GPUs: 1, State: job.Running, Run: 1, Placement: on("n0", 2), LastStartAt: &start, SubmittedAt: start},
		Job{ID: 51, Team: "vision", GPUs: 2, State: job.Running, Run: 1, Placement: on("n1", 2, 3), LastStartAt: &start, SubmittedAt: start},
		Job{ID: 13, Team: "nlp", GPUs: 4, State: job.Preempted, SubmittedAt: t0.Add(-time.Hour), AttainedService: 120, ExecutedS: 30},
	)
	e, clock, n0, n1 := handoverEngine(t, mem, []int64{28, 50}, []int64{8, 51})
	mustPass(t, e)
	if len(n0.stops) != 1 || len(n1.stops) != 1 {
		t.Fatalf("stops n0 %v n1 %v: want both 2-GPU jobs preempted for job 13 (%s)", n0.stops, n1.stops, e.Waits()[13].Reason)
	}
	for round := range 3 {
		clock.t = clock.t.Add(10 * time.Millisecond)
		delete(n0.running, 28)
		e.testExit(ctx, exit("n0", 28, -1, clock.t))
		mustPass(t, e)
		for _, s := range append(n0.starts, n1.starts...) {
			if s.JobID != 13 {
				t.Fatalf("round %d: job %d started while job 13 waits for the GPUs it was promised", round, s.JobID)
			}
		}
		clock.t = clock.t.Add(10 * time.Millisecond)
		delete(n1.running, 8)
		e.testExit(ctx, exit("n1", 8, -1, clock.t))
		mustPass(t, e)
		if mem.state(13) == job.Running {
			return
		}
	}
	t.Fatalf("job 13 never started: states 8 %s, 28 %s, 13 %s", mem.state(8), mem.state(28), mem.state(13))
}

// TestKeptBackStartIsCarriedOver: job 37 (4 GPUs, team vision, top
// queue) preempts its own team's jobs 20 and 31, the whole of n1, to run
// on one machine. Both exit at once. Deciding again then would start 20
// first: with 37 and its victims all waiting, vision holds 1 GPU, so 20
// fits within the guarantee of 4 and goes ahead of 37, which would borrow;
// 37 then finds no free machine, 31 starts too, and the next pass
// preempts them both again, without end (seen in the demo: 28 and 34
// times). The start kept back for 37 must be made as decided.
func TestKeptBackStartIsCarriedOver(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-2 * time.Minute)
	mem := newMemStore(
		Job{ID: 10, Team: "nlp", GPUs: 2, State: job.Running, Run: 1, Placement: on("n0", 0, 1), LastStartAt: &start, SubmittedAt: start},
		Job{ID: 1, Team: "vision", GPUs: 1, State: job.Running, Run: 1, Placement: on("n0", 2), LastStartAt: &start, SubmittedAt: start,
			AttainedService: 250, Queue: sched.QueueState{Index: 1}},
		Job{ID: 31, Team: "vision", GPUs: 2, State: job.Running, Run: 1, Placement: on("n1", 0, 1), LastStartAt: &start, SubmittedAt: start,
			AttainedService: 270, Queue: sched.QueueState{Index: 1}},
		Job{ID: 20, Team: "vision", GPUs: 2, State: job.Running, Run: 1, Placement: on("n1", 2, 3), LastStartAt: &start, SubmittedAt: start},
		Job{ID: 37, Team: "vision", GPUs: 4, State: job.Queued, SubmittedAt: t0.Add(-time.Minute)},
	)
	e, clock, n0, n1 := handoverEngine(t, mem, []int64{10, 1}, []int64{31, 20})
	mustPass(t, e)
	if !slices.Equal(slices.Sorted(slices.Values(n1.stops)), []int64{20, 31}) || len(n0.stops) != 0 {
		t.Fatalf("stops n0 %v n1 %v: want jobs 20 and 31 preempted for job 37 (%s)", n0.stops, n1.stops, e.Waits()[37].Reason)
	}
	clock.t = clock.t.Add(10 * time.Millisecond)
	for _, id := range n1.stops {
		delete(n1.running, id)
		e.testExit(ctx, exit("n1", id, -1, clock.t))
	}
	n1.stops = nil
	for pass := range 4 {
		clock.t = clock.t.Add(time.Second)
		mustPass(t, e)
		if len(n0.stops)+len(n1.stops) > 0 {
			t.Fatalf("pass %d: stops n0 %v n1 %v: job 37 started, nothing more to preempt", pass, n0.stops, n1.stops)
		}
	}
	if mem.state(37) != job.Running || len(n1.starts) != 1 || n1.starts[0].JobID != 37 || !slices.Equal(n1.starts[0].GPUs, []int{0, 1, 2, 3}) {
		t.Fatalf("job 37 %s, n1 starts %+v: want 37 started on n1:0-3, as decided when 20 and 31 were preempted", mem.state(37), n1.starts)
	}
	if mem.state(20) == job.Running || mem.state(31) == job.Running {
		t.Fatalf("jobs 20 %s and 31 %s: both must wait for GPUs", mem.state(20), mem.state(31))
	}
}

// handoverEngine is an engine under tiresias-l (queue limits 200 and
// 800 GPU-s) with teams vision and nlp, 4 GPUs guaranteed each, on two
// 4-GPU machines, n0 and n1, running the jobs given for each.
func handoverEngine(t *testing.T, mem *memStore, onN0, onN1 []int64) (*Engine, *fakeClock, *fakeNode, *fakeNode) {
	t.Helper()
	n0, n1 := newFakeNode("n0", 4), newFakeNode("n1", 4)
	for _, id := range onN0 {
		n0.running[id] = 1
	}
	for _, id := range onN1 {
		n1.running[id] = 1
	}
	e, clock := newTestEngine(t, mem, n0, n1)
	e.cfg.Store = &teamStore{memStore: mem, teams: []Team{{Name: "vision", GuaranteeGPUs: 4}, {Name: "nlp", GuaranteeGPUs: 4}}}
	sc, err := sched.New(sched.Config{Policy: "tiresias-l", Thresholds: []float64{200, 800}})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	return e, clock, n0, n1
}

// on names GPUs of one node.
func on(node string, idx ...int) []gpu.Ref {
	var out []gpu.Ref
	for _, i := range idx {
		out = append(out, gpu.Ref{Node: node, Index: i})
	}
	return out
}

// eightRunning are eight long 1-GPU jobs of team nlp in queue 2, started
// at start, filling n0 (jobs 1-4) and n1 (jobs 5-8); job 8 ranks lowest.
func eightRunning(start time.Time) (jobs []Job, onN0, onN1 []int64) {
	for i := int64(1); i <= 8; i++ {
		node := "n0"
		if i > 4 {
			node = "n1"
			onN1 = append(onN1, i)
		} else {
			onN0 = append(onN0, i)
		}
		jobs = append(jobs, Job{ID: i, Team: "nlp", GPUs: 1, State: job.Running, Run: 1, Placement: on(node, int(i-1)%4),
			LastStartAt: &start, SubmittedAt: start, AttainedService: 5000 + float64(i),
			Queue: sched.QueueState{Index: 2, Since: seconds(start) + float64(i)*60}})
	}
	return jobs, onN0, onN1
}

// TestNoNewVictimWhileOneLeaves: eight long 1-GPU jobs of queue 2 fill
// n0 and n1; an 8-GPU job waits in queue 2 (so that the preempted-first
// rule moves a victim ahead of the running jobs of its queue), and job
// 20 arrives in queue 0. The first pass stops job 8 for it. While job 8
// saves its checkpoint the engine passes every second: each pass saw job
// 8 running (now first of its queue) and job 20 waiting, and stopped
// another job for job 20, one a second (jobs 7, 6, 5, 4). Now job 8 is
// leaving and job 20 is seen on the GPU promised to it: nothing more is
// stopped, job 20 says what it waits for, and starts there once job 8
// has exited.
func TestNoNewVictimWhileOneLeaves(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-2 * time.Hour)
	jobs, onN0, onN1 := eightRunning(start)
	jobs = append(jobs,
		Job{ID: 30, Team: "nlp", GPUs: 8, State: job.Preempted, SubmittedAt: start, AttainedService: 9000, ExecutedS: 1000,
			Queue: sched.QueueState{Index: 2, Since: seconds(start)}},
		Job{ID: 20, Team: "nlp", GPUs: 1, State: job.Queued, SubmittedAt: t0.Add(-time.Second)})
	mem := newMemStore(jobs...)
	e, clock, n0, n1 := handoverEngine(t, mem, onN0, onN1)
	e.cfg.Store = mem // no teams
	for pass := range 6 {
		mustPass(t, e)
		if stops := append(slices.Clone(n0.stops), n1.stops...); !slices.Equal(stops, []int64{8}) {
			t.Fatalf("pass %d, %d s into job 8's grace period: stopped %v; want job 8 alone", pass, pass, stops)
		}
		if w := e.Waits()[20].Reason; !strings.Contains(w, "job 8 has released n1:3") {
			t.Fatalf("pass %d: job 20 waits %q; want it waiting for job 8 to release n1:3", pass, w)
		}
		clock.t = clock.t.Add(time.Second)
	}
	delete(n1.running, 8)
	e.testExit(ctx, exit("n1", 8, -1, clock.t))
	mustPass(t, e)
	if mem.state(20) != job.Running || len(n1.starts) != 1 || n1.starts[0].JobID != 20 || !slices.Equal(n1.starts[0].GPUs, []int{3}) {
		t.Fatalf("after job 8 exited: job 20 %s, n1 starts %+v; want job 20 started on n1:3", mem.state(20), n1.starts)
	}
	if stops := append(slices.Clone(n0.stops), n1.stops...); !slices.Equal(stops, []int64{8}) {
		t.Fatalf("stopped %v; want job 8 alone", stops)
	}
}

// TestHandoverCountsForNoRank: the service a victim attains between the
// request to stop it and its exit (its handover) counts in its figures
// but not toward its rank. Under tiresias-g a job's index can rise with
// its service, and a victim that left with its handover counted could
// outrank the job that replaced it and preempt it back, pass after pass
// (docs/simulator.md, "Passes between events"). Job 8 is preempted for
// job 20 as in TestNoNewVictimWhileOneLeaves, takes 5 s to exit, and is
// seen by each pass meanwhile with its service at the request; once out,
// its queue state leaves the 5 s out (CycleService, CycleExecuted) while
// its attained service and executed time include them.
func TestHandoverCountsForNoRank(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-2 * time.Hour)
	jobs, onN0, onN1 := eightRunning(start)
	for i := range jobs {
		jobs[i].ExecutedS, jobs[i].Queue.CycleService, jobs[i].Queue.CycleExecuted = 100, 40, 30
	}
	jobs = append(jobs, Job{ID: 20, Team: "nlp", GPUs: 1, State: job.Queued, SubmittedAt: t0.Add(-time.Second)})
	mem := newMemStore(jobs...)
	e, clock, _, n1 := handoverEngine(t, mem, onN0, onN1)
	e.cfg.Store = mem
	mustPass(t, e)
	if !slices.Equal(n1.stops, []int64{8}) {
		t.Fatalf("stopped %v; want job 8 for job 20", n1.stops)
	}
	asked := clock.t
	ranToAsk := asked.Sub(start).Seconds()
	// Pages say it is leaving (app: the reason of a running job asked to stop).
	if s, ok := e.StoppingRuns()[8]; !ok || s.Run != 1 || s.To != job.Preempted || !s.At.Equal(asked) || !strings.Contains(s.Reason, "job 20") {
		t.Fatalf("job 8's stop as published: %+v, %v; want run 1 asked to stop at %v, preempted for job 20", s, ok, asked)
	}
	for range 5 {
		clock.t = clock.t.Add(time.Second)
		mustPass(t, e)
		mem.mu.Lock()
		j := *mem.jobs[8]
		mem.mu.Unlock()
		sj := e.schedJob(&j, clock.t, 0)
		if sj.State != sched.Leaving || sj.AttainedService != 5008+ranToAsk || sj.ExecutedS != 100+ranToAsk {
			t.Fatalf("%s after the request, job 8 is seen %s with %.0f GPU-s attained, %.0f s executed; want leaving with %.0f and %.0f, its service at the request",
				clock.t.Sub(asked), sj.State, sj.AttainedService, sj.ExecutedS, 5008+ranToAsk, 100+ranToAsk)
		}
	}
	delete(n1.running, 8)
	e.testExit(ctx, exit("n1", 8, -1, clock.t))
	mustPass(t, e)
	if s, ok := e.StoppingRuns()[8]; ok {
		t.Fatalf("job 8 out, its stop still published: %+v", s)
	}
	mem.mu.Lock()
	j := *mem.jobs[8]
	mem.mu.Unlock()
	ran := clock.t.Sub(start).Seconds()
	if j.State != job.Preempted || j.AttainedService != 5008+ran || j.ExecutedS != 100+ran {
		t.Fatalf("job 8 after its exit: %s, %.0f GPU-s, %.0f s; want preempted with %.0f GPU-s and %.0f s, its handover included",
			j.State, j.AttainedService, j.ExecutedS, 5008+ran, 100+ran)
	}
	if j.Queue.CycleService != 45 || j.Queue.CycleExecuted != 35 {
		t.Fatalf("job 8's queue state after its exit: cycle service %v, cycle executed %v; want 40 + 5 and 30 + 5 (the handover left out of its rank)",
			j.Queue.CycleService, j.Queue.CycleExecuted)
	}
	if s := e.schedJob(&j, clock.t, 0); s.AttainedService-s.Queue.CycleService != 5008+ranToAsk-40 {
		t.Fatalf("job 8 ranks by %.0f GPU-s of its cycle; want %.0f, its cycle's service at the request", s.AttainedService-s.Queue.CycleService, 5008+ranToAsk-40)
	}
}

// TestPromisedJobIsForecast: job 20, promised the GPU of job 8, which it
// preempted and which saves its checkpoint, is shown running there to the
// scheduler (sched.Promises.Present), so the forecaster had no start to
// give it: its forecast read "not forecast yet" for the whole handover
// (a live demo with 5 s checkpoints flipped 12 forecasts so in 10
// minutes). It is forecast to start between now and job 8's stop request
// plus the grace period, likely as long after the request as runs took
// to leave so far.
func TestPromisedJobIsForecast(t *testing.T) {
	start := t0.Add(-2 * time.Hour)
	jobs, onN0, onN1 := eightRunning(start)
	jobs = append(jobs, Job{ID: 20, Team: "nlp", GPUs: 1, State: job.Queued, SubmittedAt: t0.Add(-time.Second)})
	mem := newMemStore(jobs...)
	e, clock, _, n1 := handoverEngine(t, mem, onN0, onN1)
	e.cfg.Store = mem
	sc, err := sched.New(sched.Config{Policy: "tiresias-l", Thresholds: []float64{200, 800}, HandoverS: 10})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	for _, c := range []struct {
		name                  string
		releases              int64
		releaseS              float64
		likelyAfterTheRequest time.Duration
	}{
		{"no run has left yet: likely at the grace period's end", 0, 0, 10 * time.Second},
		{"runs took 4 s to leave", 2, 8, 4 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.stats.s.Releases, e.stats.s.ReleaseSeconds = c.releases, c.releaseS
			e.fc.lastAt = time.Time{} // a forecast at this pass
			mustPass(t, e)
			if !slices.Equal(n1.stops, []int64{8}) {
				t.Fatalf("stopped %v; want job 8 for job 20", n1.stops)
			}
			asked := e.runs[8].stopAsked
			f, ok := e.Forecast(20)
			want := JobForecast{State: forecast.StateExpected, MadeAt: clock.t, Earliest: clock.t,
				Likely: asked.Add(c.likelyAfterTheRequest), Latest: asked.Add(10 * time.Second)}
			if !ok || f != want {
				t.Fatalf("job 20's forecast %+v (%v); want %+v", f, ok, want)
			}
			clock.t = clock.t.Add(time.Second)
		})
	}
}

// TestExitTimes: a run asked to stop is likely out as long after the
// request as runs took on average so far, by the grace period at the
// latest, and neither before now; before any run has exited, at the
// grace period's end; without a grace period nothing is said.
func TestExitTimes(t *testing.T) {
	asked := t0
	at := seconds(t0)
	for _, c := range []struct {
		name           string
		x              exitTimes
		now            float64
		likely, latest float64
		ok             bool
	}{
		{"no grace period", exitTimes{mean: 3}, at, 0, 0, false},
		{"none exited yet", exitTimes{grace: 10}, at, at + 10, at + 10, true},
		{"the mean", exitTimes{grace: 10, mean: 4}, at + 1, at + 4, at + 10, true},
		{"the mean passed", exitTimes{grace: 10, mean: 4}, at + 6, at + 6, at + 10, true},
		{"a mean past the grace period", exitTimes{grace: 10, mean: 30}, at, at + 10, at + 10, true},
		{"the grace period passed", exitTimes{grace: 10, mean: 4}, at + 12, at + 12, at + 12, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			likely, latest, ok := c.x.of(asked, c.now)
			if likely != c.likely || latest != c.latest || ok != c.ok {
				t.Errorf("of: %v, %v, %v; want %v, %v, %v", likely-at, latest-at, ok, c.likely-at, c.latest-at, c.ok)
			}
		})
	}
	// The handover the forecast's scenarios give each job they preempt.
	for _, c := range []struct {
		x    exitTimes
		want float64
	}{{exitTimes{}, 0}, {exitTimes{mean: 3}, 0}, {exitTimes{grace: 10}, 10}, {exitTimes{grace: 10, mean: 4}, 4}, {exitTimes{grace: 10, mean: 30}, 10}} {
		if got := c.x.expected(); got != c.want {
			t.Errorf("%+v: expected %v; want %v", c.x, got, c.want)
		}
	}
}

// TestWithdrawnPromiseIsForecast: job 20 of team nlp was promised job
// 8's GPU; while job 8 saves its checkpoint, team vision, under its
// guarantee, submits job 21 and reclaims a GPU from nlp, which borrows
// four: job 20, seen running there and ranked lowest of nlp's jobs
// (submitted last), is the one reclaimed, and its promise is withdrawn.
// Job 20 waits on, and the forecast made at that pass must say when it
// starts: live, it read "not forecast yet" until the next forecast.
func TestWithdrawnPromiseIsForecast(t *testing.T) {
	start := t0.Add(-2 * time.Hour)
	jobs, onN0, onN1 := eightRunning(start)
	recent := t0.Add(-5 * time.Second)
	for i := range 7 { // jobs 1-7 rank above job 20: queue 0, submitted before it
		jobs[i].Queue, jobs[i].AttainedService, jobs[i].LastStartAt = sched.QueueState{}, 0, &recent
	}
	jobs = append(jobs, Job{ID: 20, Team: "nlp", GPUs: 1, State: job.Queued, SubmittedAt: t0.Add(-time.Second)})
	mem := newMemStore(jobs...)
	e, clock, n0, n1 := handoverEngine(t, mem, onN0, onN1)
	sc, err := sched.New(sched.Config{Policy: "tiresias-l", Thresholds: []float64{200, 800}, HandoverS: 10, MinRuntimeS: sched.NoMinRuntime})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	mustPass(t, e)
	if !slices.Equal(n1.stops, []int64{8}) {
		t.Fatalf("stopped %v; want job 8 for job 20", n1.stops)
	}
	if _, ok := e.promised[20]; !ok {
		t.Fatalf("job 20 holds no promise: %v", e.promised)
	}
	clock.t = clock.t.Add(time.Second)
	mem.mu.Lock()
	mem.jobs[21] = &Job{ID: 21, Team: "vision", GPUs: 1, State: job.Queued, SubmittedAt: clock.t}
	mem.mu.Unlock()
	e.fc.lastAt = time.Time{} // a forecast at this pass
	mustPass(t, e)
	if _, ok := e.promised[20]; ok {
		t.Fatalf("job 20 still holds its promise (%v): the test needs it withdrawn; stops %v %v; job 21 waits: %s", e.promised, n0.stops, n1.stops, e.Waits()[21].Reason)
	}
	f, ok := e.Forecast(20)
	if !ok || f.State != forecast.StateExpected || f.MadeAt != clock.t {
		t.Fatalf("job 20's forecast after its promise was withdrawn: %+v (%v); want one made now", f, ok)
	}
}
