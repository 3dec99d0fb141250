package sim

import (
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/accounting"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/salussim"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// runsObserver records each job's runs and the attained service the
// scheduler saw at each pass.
type runsObserver struct {
	start, end map[int64]float64
	gpu        map[int64]gpu.Ref
	seen       []seenService
}

type seenService struct {
	at       float64
	job      int64
	attained float64
}

func (o *runsObserver) Pass(s sched.Snapshot, d sched.Decisions) {
	for _, st := range d.Starts {
		o.gpu[st.JobID] = st.GPUs[0]
	}
	for _, j := range s.Jobs {
		if j.State == sched.Running {
			o.seen = append(o.seen, seenService{s.Now, j.ID, j.AttainedService})
		}
	}
}
func (o *runsObserver) Started(id int64, at float64)     { o.start[id] = at }
func (o *runsObserver) Finished(id int64, at, _ float64) { o.end[id] = at }

// TestSharedAttainedAgreesWithAccounting: under Salus sharing, the
// simulator's attained service (what Tiresias ranks by) is each job's
// share of its GPU over time, as accounting counts the same runs, and as
// the engine counts them (core/engine TestSharedAttainedService): the
// same usage.Shares and usage.Accrual. Three jobs of 400 milli on one
// 16 GiB GPU: 0.4 each while one or two run, a third each (1.2 scaled to
// one GPU) while three do.
func TestSharedAttainedAgreesWithAccounting(t *testing.T) {
	jobs := []trace.Job{fj(1, 0, 400, 300), fj(2, 0, 400, 100), fj(3, 50, 400, 100)}
	nodes, err := trace.ParseClusterSpec("1x1x16")
	if err != nil {
		t.Fatal(err)
	}
	o := &runsObserver{start: map[int64]float64{}, end: map[int64]float64{}, gpu: map[int64]gpu.Ref{}}
	cfg := Config{Sched: sched.Config{Policy: "fifo", OmitWaits: true}, Nodes: nodes, Sharing: salussim.SharingSalus,
		LanePolicy: lanes.Fair, Observer: o}
	s, err := newSimulator(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.share.most != 3 {
		t.Fatalf("at most %d jobs on the GPU, want 3", s.share.most)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Second))) }
	// allocated is accounting's GPU-seconds of job id up to now.
	allocated := func(id int64, now float64) float64 {
		var runs []accounting.Run
		for jid, st := range o.start {
			if st > now {
				continue
			}
			e := at(math.Min(o.end[jid], now))
			runs = append(runs, accounting.Run{Job: jid, Team: "t", User: strconv.FormatInt(jid, 10),
				GPUs: []string{o.gpu[jid].String()}, Sharing: true, Fraction: 0.4, Start: at(st), End: &e})
		}
		sum := 0.0
		for _, byKey := range accounting.Measure(runs, nil, t0, t0.AddDate(0, 0, 1), at(now), 0.05) {
			sum += byKey[accounting.Key{Team: "t", User: strconv.FormatInt(id, 10)}].Allocated
		}
		return sum
	}
	for i := range s.jobs {
		j := &s.jobs[i]
		if !j.done {
			t.Fatalf("job %d did not finish", j.tj.ID)
		}
		if want := allocated(j.tj.ID, j.finish); math.Abs(j.service-want) > 1e-6 {
			t.Errorf("job %d: attained %v GPU-seconds, accounting %v", j.tj.ID, j.service, want)
		}
		if j.service >= 0.4*j.executed+1e-9 || j.service <= j.executed/3-1e-9 {
			t.Errorf("job %d: attained %v in %v s, want between a third and 0.4 of it", j.tj.ID, j.service, j.executed)
		}
	}
	if len(o.seen) == 0 {
		t.Fatal("no pass saw a running job")
	}
	for _, sv := range o.seen {
		if want := allocated(sv.job, sv.at); math.Abs(sv.attained-want) > 1e-6 {
			t.Errorf("pass at %v: job %d attained %v, accounting %v", sv.at, sv.job, sv.attained, want)
		}
	}
}
