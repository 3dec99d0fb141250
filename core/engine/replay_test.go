package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
)

// replayTrace is a small trace that makes tiresias-l demote, preempt and
// resume on one 4-GPU machine, with queue limits of 200 and 800 GPU-s.
var replayTrace = []trace.Job{
	{ID: 1, Submit: 0, Duration: 300, GPUs: 2},
	{ID: 2, Submit: 0, Duration: 500, GPUs: 2},
	{ID: 3, Submit: 40, Duration: 60, GPUs: 1},
	{ID: 4, Submit: 90, Duration: 400, GPUs: 4},
	{ID: 5, Submit: 150, Duration: 30, GPUs: 2},
	{ID: 6, Submit: 151, Duration: 200, GPUs: 1},
	{ID: 7, Submit: 300, Duration: 90, GPUs: 3},
	{ID: 8, Submit: 420, Duration: 700, GPUs: 1},
	{ID: 9, Submit: 600, Duration: 45, GPUs: 2},
	{ID: 10, Submit: 610, Duration: 120, GPUs: 4},
	{ID: 11, Submit: 900, Duration: 20, GPUs: 1},
	{ID: 12, Submit: 1000, Duration: 300, GPUs: 2},
}

// replayEvent is one thing that happened to a job: it started, was
// preempted, or finished, at a time in seconds from the trace's start.
type replayEvent struct {
	at   float64
	job  int64
	what string
}

func (ev replayEvent) String() string { return fmt.Sprintf("%8.3f job %d %s", ev.at, ev.job, ev.what) }

// simTimeline records the simulator's decisions. A job asked to stop
// runs on through its handover, and the scheduler, seeing it run, may
// preempt it again: that changes nothing (the engine stops a run once),
// so only the first preemption of each run is an event.
type simTimeline struct {
	events  []replayEvent
	stopped map[int64]bool // preempted since it last started
}

func (o *simTimeline) Pass(s sched.Snapshot, d sched.Decisions) {
	if o.stopped == nil {
		o.stopped = make(map[int64]bool)
	}
	for _, p := range d.Preempts {
		if !o.stopped[p.JobID] {
			o.stopped[p.JobID] = true
			o.events = append(o.events, replayEvent{s.Now, p.JobID, "preempted"})
		}
	}
}
func (o *simTimeline) Started(id int64, at float64) {
	delete(o.stopped, id)
	o.events = append(o.events, replayEvent{at, id, "started"})
}
func (o *simTimeline) Finished(id int64, at, _ float64) {
	o.events = append(o.events, replayEvent{at, id, "finished"})
}

// TestLiveMatchesSimulator replays one trace through the live engine, on
// its fake clock with a fake machine whose jobs exit the moment they are
// told to (no handover), and through the simulator, and requires the same
// decisions at the same times: every start, preemption and finish. The
// engine passes at arrivals, exits and the scheduler's Recheck, as it does
// live (Run's timer), so demotions land when the simulator makes them.
func TestLiveMatchesSimulator(t *testing.T) {
	limits := []float64{200, 800}
	for _, cfg := range []sched.Config{
		{Policy: "tiresias-l", Thresholds: limits},
		{Policy: "tiresias-l", Thresholds: limits, Reference: true},
		{Policy: "tiresias-g", Thresholds: limits},
		{Policy: "srsf"},
		{Policy: "fifo"},
	} {
		name := cfg.Policy
		if cfg.Reference {
			name += "/reference"
		}
		t.Run(name, func(t *testing.T) {
			// Preempted jobs leave at once, or 7 s after being asked
			// (the simulator's HandoverS, the time a job takes to save
			// a checkpoint and exit live).
			for _, handover := range []float64{0, 7} {
				simTL := &simTimeline{}
				res, err := sim.Run(context.Background(), replayTrace, sim.Config{
					Sched: cfg, Nodes: []trace.Node{{Name: "n0", GPUs: 4}}, Observer: simTL, HandoverS: handover,
				})
				if err != nil {
					t.Fatal(err)
				}
				if res.Finished != len(replayTrace) || (res.Preemptions == 0) != (cfg.Policy == "fifo") {
					t.Fatalf("the simulator finished %d of %d jobs with %d preemptions: the trace must preempt", res.Finished, len(replayTrace), res.Preemptions)
				}
				live := replayLive(t, cfg, replayTrace, handover)
				want, got := sortEvents(simTL.events), sortEvents(live)
				if !slices.EqualFunc(want, got, func(a, b replayEvent) bool {
					return a.job == b.job && a.what == b.what && math.Abs(a.at-b.at) < 1e-6
				}) {
					t.Errorf("handover %v s: live and simulated decisions differ:\nsimulator:\n%s\nlive:\n%s", handover, joinEvents(want), joinEvents(got))
				}
			}
		})
	}
}

// replayLive drives the engine through jobs on a fake clock.
func replayLive(t *testing.T, cfg sched.Config, jobs []trace.Job, handover float64) []replayEvent {
	t.Helper()
	ctx := context.Background()
	store := newMemStore()
	n := newFakeNode("n0", 4)
	e, clock := newTestEngine(t, store, n)
	sc, err := sched.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	at := func() float64 { return clock.t.Sub(t0).Seconds() }
	var events []replayEvent
	finish := map[int64]float64{}   // running job -> when it ends
	leave := map[int64]job.RunRef{} // preempted job -> its run, until it exits
	leaveAt := map[int64]float64{}  // and when it exits
	next := 0                       // the next arrival
	starts, stops := 0, 0
	for steps := 0; ; steps++ {
		if steps > 10000 {
			t.Fatal("the replay does not end")
		}
		// The next event: an arrival, an exit, or the scheduler's Recheck.
		when := math.Inf(1)
		if next < len(jobs) {
			when = jobs[next].Submit
		}
		for _, f := range finish {
			when = min(when, f)
		}
		for _, l := range leaveAt {
			when = min(when, l)
		}
		if !e.recheck.IsZero() {
			when = min(when, e.recheck.Sub(t0).Seconds())
		}
		if math.IsInf(when, 1) {
			break
		}
		clock.t = t0.Add(time.Duration(math.Round(max(when, at()) * 1e9)))
		now := at()
		ids := make([]int64, 0, len(finish))
		for id, f := range finish {
			if f <= now+1e-9 {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			delete(finish, id)
			delete(n.running, id)
			e.testExit(ctx, exit("n0", id, 0, clock.t))
			events = append(events, replayEvent{now, id, "finished"})
		}
		ids = ids[:0]
		for id, l := range leaveAt {
			if l <= now+1e-9 {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			ref := leave[id]
			delete(leave, id)
			delete(leaveAt, id)
			delete(n.running, id)
			e.testExit(ctx, job.Exit{Node: "n0", JobID: ref.Job, Run: ref.Run, ExitCode: 143, At: clock.t})
		}
		for ; next < len(jobs) && jobs[next].Submit <= now; next++ {
			j := jobs[next]
			store.mu.Lock()
			store.jobs[j.ID] = &Job{ID: j.ID, GPUs: j.GPUs, SimDuration: j.Duration, SubmittedAt: t0.Add(time.Duration(j.Submit * 1e9)), State: job.Queued}
			store.mu.Unlock()
		}
		// Pass until nothing more happens at this instant: a preempted
		// job exits at once, and the job placed on its GPUs starts in
		// the next pass.
		for {
			mustPass(t, e)
			changed := false
			for ; starts < len(n.starts); starts++ {
				s := n.starts[starts]
				finish[s.JobID] = now + s.SimRemaining.Seconds()
				events = append(events, replayEvent{now, s.JobID, "started"})
				changed = true
			}
			for ; stops < len(n.stopRefs); stops++ {
				ref := n.stopRefs[stops]
				delete(finish, ref.Job)
				events = append(events, replayEvent{now, ref.Job, "preempted"})
				if handover > 0 {
					leave[ref.Job], leaveAt[ref.Job] = ref, now+handover
					continue
				}
				delete(n.running, ref.Job)
				e.testExit(ctx, job.Exit{Node: "n0", JobID: ref.Job, Run: ref.Run, ExitCode: 143, At: clock.t})
				changed = true
			}
			if !changed {
				break
			}
		}
	}
	return events
}

func sortEvents(evs []replayEvent) []replayEvent {
	out := slices.Clone(evs)
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].at != out[b].at {
			return out[a].at < out[b].at
		}
		if out[a].job != out[b].job {
			return out[a].job < out[b].job
		}
		return out[a].what < out[b].what
	})
	return out
}

func joinEvents(evs []replayEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestEngineLearnsGPUTime: the engine learns tiresias-g's distribution as
// the simulator does with LearnPrior (sched.GPUTimeLearner): a job that
// succeeds adds its GPU-time, its earlier runs' service included, and the
// next pass's snapshot carries the distribution with the running jobs'
// service as lower bounds; a failed job adds nothing.
func TestEngineLearnsGPUTime(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(
		Job{ID: 1, GPUs: 2, SubmittedAt: t0, ExecutedS: 30, AttainedService: 60},
		Job{ID: 2, GPUs: 1, SubmittedAt: t0},
		Job{ID: 3, GPUs: 1, SubmittedAt: t0},
	)
	n := newFakeNode("n0", 4)
	e, clock := newTestEngine(t, store, n)
	learner := sched.NewGPUTimeLearner([]float64{7})
	e.cfg.GPUTime = learner
	mustPass(t, e)
	before := learner.Len()
	clock.t = clock.t.Add(50 * time.Second)
	delete(n.running, 1)
	e.testExit(ctx, exit("n0", 1, 0, clock.t))
	delete(n.running, 3)
	e.testExit(ctx, exit("n0", 3, 2, clock.t))
	mustPass(t, e)
	if got := learner.Len(); got != before+1 {
		t.Fatalf("learnt %d GPU-times, want %d: one job succeeded, one failed", got, before+1)
	}
	// Job 1 ran 50 s on 2 GPUs after 60 GPU-s before: 160. Job 2 still
	// runs, at 50 GPU-s: a lower bound.
	done := append(sched.PriorGPUTime(), 7, 160)
	want := sched.LearnGPUTimeDist(done, []float64{50})
	if got := learner.Dist(nil); got.Len() != want.Len() || got.FullIndex(100) != want.FullIndex(100) || got.FullIndex(1000) != want.FullIndex(1000) {
		t.Errorf("learnt distribution: %d samples, index %v at 100; want %d, %v", got.Len(), got.FullIndex(100), want.Len(), want.FullIndex(100))
	}
}
