package sim

import (
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TestPassesBetweenEventsDecideNothingNew: the live engine passes every
// second (and at every event), the simulator at events and at the
// scheduler's rechecks. For the replays to tell what the portal would
// do, a pass between events must decide nothing the next event's pass
// would not: PassEveryS 1, live's pace, must leave every job's start,
// preemption and end where the replay without it puts them. It did not
// with a handover: a preempted job, seen running through its grace
// period while the job it made room for was seen waiting, had another
// job preempted for that job every second (the preempted-first rule had
// moved the victim ahead of its queue), and its other GPUs went to jobs
// that it preempted back once out. Now it is seen leaving, and the job
// promised its GPUs running there (sched.Promises.Present).
//
// tiresias-g is left out: its Gittins index moves with a running job's
// service between events, and the core asks for no pass where one job's
// index crosses another's (docs/simulator.md, "Passes between events").
func TestPassesBetweenEventsDecideNothingNew(t *testing.T) {
	tr, err := trace.ReadFile(sharedTrace(t, "openb-last6w-tiresias.csv"), "")
	if err != nil {
		t.Fatal(err)
	}
	jobs := tr.Jobs[:1500]
	for _, c := range []sched.Config{
		{Policy: "fifo"},
		{Policy: "srtf"},
		{Policy: "dlas"},
		{Policy: "tiresias-l"},
		{Policy: "tiresias-l", Reference: true},
	} {
		c.Thresholds = []float64{3250, 7200}
		t.Run(c.Policy+map[bool]string{true: "/reference"}[c.Reference], func(t *testing.T) {
			events, eventJCT := run(t, jobs, "2x8", Config{Sched: c, HandoverS: 7})
			if events.Preemptions == 0 && c.Policy != "fifo" {
				t.Fatalf("no preemption: the trace must preempt")
			}
			every, everyJCT := run(t, jobs, "2x8", Config{Sched: c, HandoverS: 7, PassEveryS: 1})
			if every.Passes < 3*events.Passes {
				t.Fatalf("%d passes with a pass every second, %d without: it must pass between events", every.Passes, events.Passes)
			}
			differ := 0
			for id, jct := range eventJCT {
				if everyJCT[id] != jct {
					differ++
				}
			}
			if differ > 0 || every.Preemptions != events.Preemptions || every.BriefRuns != events.BriefRuns {
				t.Errorf("a pass every second: %d preemptions (%d of runs under a minute), average JCT %.1f s; at events only: %d (%d), %.1f s; %d of %d jobs end elsewhere",
					every.Preemptions, every.BriefRuns, every.AvgJCT, events.Preemptions, events.BriefRuns, events.AvgJCT, differ, len(eventJCT))
			}
		})
	}
}
