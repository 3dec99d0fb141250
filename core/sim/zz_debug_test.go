package sim

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

type dbgObs struct{ watch int64 }

func (o *dbgObs) Pass(s sched.Snapshot, d sched.Decisions) {
	for _, r := range d.Reservations {
		if r.JobID != o.watch {
			continue
		}
		fmt.Printf("t=%.0f rsv from %.0f gpus %s\n", s.Now, r.FromS, r.GPUText())
		for _, j := range s.Jobs {
			if j.State == sched.Running {
				if false { fmt.Printf("   run %d %s class=%v start=%.0f exec=%.0f lim=%.0f q=%d\n", j.ID, j.Team, j.Class, j.LastStartTime, j.ExecutedS, j.TimeLimitS, j.Queue.Index)}
			}
		}
		for _, st := range d.Starts {
			fmt.Printf("   start %d %v\n", st.JobID, st.GPUs)
		}
	}
	for _, w := range d.Waits {
		if w.JobID == o.watch {
			line := ""
			for _, j := range s.Jobs {
				if j.State == sched.Running {
					line += fmt.Sprintf(" %d/%v/q%d/s%.0f", j.ID, j.Class, j.Queue.Index, j.LastStartTime)
				}
			}
			fmt.Printf("t=%.0f W%s\n", s.Now, line)
		}
	}
}

func TestZZDebug(t *testing.T) {
	jobs := readMixedSessions(t)
	var w int64
	fmt.Sscan(os.Getenv("WATCH"), &w)
	cfg := Config{Sched: sched.Config{Policy: "tiresias-l", ReserveAfterS: 900}, Nodes: []trace.Node{{Name: "node-0", GPUs: 8}}, Observer: &dbgObs{w}}
	if os.Getenv("TEAMS") != "" {
		cfg.Teams = []trace.Team{{Name: "vision", GuaranteeGPUs: 4}, {Name: "nlp", GuaranteeGPUs: 4}}
	}
	s, err := newSimulator(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range s.jobs {
		j := &s.jobs[i]
		if j.tj.GPUs == 8 {
			fmt.Printf("big %d submit %.0f pending %.0f\n", j.tj.ID, j.tj.Submit, j.finish-j.tj.Submit-j.tj.Duration)
		}
	}
}

func (o *dbgObs) Started(id int64, at float64)            {}
func (o *dbgObs) Finished(id int64, at, executedS float64) {}
