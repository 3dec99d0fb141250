package models_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestSetReasonsInBatches sets the reasons of more jobs than one statement
// takes: every waiting job gets its own, a running job keeps the reason it
// had, one too long for the column is cut, and the writes are counted.
func TestSetReasonsInBatches(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		var js []*models.Job
		for i := range 1203 {
			js = append(js, &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 10,
				SubmittedAt: t0.Add(time.Duration(i) * time.Second)})
		}
		if err := s.CreateJobs(ctx, js); err != nil {
			t.Fatal(err)
		}
		running := js[700].ID
		if _, err := s.MarkStarted(ctx, running, []string{"n0:0"}, t0); err != nil {
			t.Fatal(err)
		}
		writes := s.Writes()["wait_reason"]
		reasons := make(map[int64]string, len(js))
		for _, j := range js {
			reasons[j.ID] = fmt.Sprintf("needs 1 GPU; 0 free; %d jobs ahead in queue 0", j.ID-1)
		}
		long := js[3].ID
		reasons[long] = strings.Repeat("é", 400) // 800 bytes
		if err := s.SetReasons(ctx, reasons); err != nil {
			t.Fatal(err)
		}
		if got := s.Writes()["wait_reason"] - writes; got != int64(len(reasons)) {
			t.Errorf("wait_reason writes %d, want %d", got, len(reasons))
		}
		for _, j := range js {
			got, err := s.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			switch want := reasons[j.ID]; j.ID {
			case running:
				if got.Reason == want {
					t.Errorf("running job %d took the reason %q", j.ID, got.Reason)
				}
			case long:
				if got.Reason != strings.Repeat("é", 256) {
					t.Errorf("long reason stored as %d bytes, want 512", len(got.Reason))
				}
			default:
				if got.Reason != want {
					t.Fatalf("job %d reason %q, want %q", j.ID, got.Reason, want)
				}
			}
		}
	})
}

// TestMarkStartedAll records a pass's starts in one transaction: a start
// that cannot be recorded (its job was cancelled meanwhile) fails alone.
func TestMarkStartedAll(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		var js []*models.Job
		for i := range 3 {
			js = append(js, &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 10,
				SubmittedAt: t0.Add(time.Duration(i) * time.Second)})
		}
		if err := s.CreateJobs(ctx, js); err != nil {
			t.Fatal(err)
		}
		if err := s.Cancel(ctx, js[1].ID, "cancelled by alice", t0); err != nil {
			t.Fatal(err)
		}
		starts := []models.Start{{Job: js[0].ID, Placement: []string{"n0:0"}, CPUs: 6}, {Job: js[1].ID, Placement: []string{"n0:1"}},
			{Job: js[2].ID, Placement: []string{"n0:2"}}}
		runs, errs, err := s.MarkStartedAll(ctx, starts, t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(errs[1], models.ErrConflict) || runs[1] != 0 {
			t.Errorf("the cancelled job's start: run %d, err %v; want a conflict", runs[1], errs[1])
		}
		for _, i := range []int{0, 2} {
			if errs[i] != nil || runs[i] != 1 {
				t.Fatalf("start %d: run %d, err %v; want run 1", i, runs[i], errs[i])
			}
			j, err := s.Job(ctx, js[i].ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != models.JobRunning || j.Run != 1 || len(j.Placement) != 1 || j.Placement[0] != starts[i].Placement[0] {
				t.Errorf("job %d: %s run %d on %v; want running run 1 on %v", j.ID, j.State, j.Run, j.Placement, starts[i].Placement)
			}
			if j.AllocCPUs != starts[i].CPUs {
				t.Errorf("job %d was given %d CPUs; want %d", j.ID, j.AllocCPUs, starts[i].CPUs)
			}
		}
		// Its CPUs stay once the run has ended (sacct's AllocCPUS), and a
		// new run's replace them.
		if err := s.MarkStopped(ctx, job.RunRef{Job: js[0].ID, Run: 1}, models.JobPreempted, nil, "preempted", usage.Service{}, t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if j, err := s.Job(ctx, js[0].ID); err != nil || j.AllocCPUs != 6 {
			t.Errorf("once its run ended the job was given %d CPUs (%v); want 6", j.AllocCPUs, err)
		}
		if _, _, err := s.MarkStartedAll(ctx, []models.Start{{Job: js[0].ID, Placement: []string{"n0:1"}, CPUs: 2}}, t0.Add(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if j, err := s.Job(ctx, js[0].ID); err != nil || j.AllocCPUs != 2 || j.Run != 2 {
			t.Errorf("its second run (%d) was given %d CPUs (%v); want run 2 given 2", j.Run, j.AllocCPUs, err)
		}
		if j, err := s.Job(ctx, js[1].ID); err != nil || j.State != models.JobCancelled {
			t.Errorf("the cancelled job: %+v, %v", j, err)
		}
	})
}
