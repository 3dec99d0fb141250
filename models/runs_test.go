package models_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestRunsAreRecorded: every start is a numbered run in the runs table,
// closed with how it ended; a run resumed after its machine came back is
// the same run, reopened, its time counted across the gap: it never
// stopped.
func TestRunsAreRecorded(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		j := &models.Job{Name: "r", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: t0}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		run1, err := s.MarkStarted(ctx, j.ID, []string{"a1:0"}, t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run1}, models.JobQueued, nil, "requeued: node a1 lost", usage.Service{}, t0.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		// a1 comes back still running run 1: resumed, its time counted
		// from when its record ended (the loss), not from its return.
		if from, err := s.MarkResumed(ctx, job.RunRef{Job: j.ID, Run: run1}, []string{"a1:0"}, "resumed", t0.Add(12*time.Second)); err != nil || !from.Equal(t0.Add(10*time.Second)) {
			t.Fatalf("resume: counted from %v, err %v; want %v", from, err, t0.Add(10*time.Second))
		}
		if got, err := s.Job(ctx, j.ID); err != nil || got.LastStartAt == nil || !got.LastStartAt.Equal(t0.Add(10*time.Second)) {
			t.Errorf("after the resume the job's last start = %v (err %v), want the loss at +10s", got.LastStartAt, err)
		}
		if _, err := s.MarkResumed(ctx, job.RunRef{Job: j.ID, Run: run1}, []string{"a1:0"}, "resumed", t0.Add(12*time.Second)); !errors.Is(err, models.ErrConflict) {
			t.Errorf("resume a running job: err = %v, want ErrConflict", err)
		}
		// The history says the run was taken back, not started again
		// (issue 32: the soak's job 44 read "requeued", then "running: on
		// soak0:1", like a second run).
		if es, err := s.JobEvents(ctx, j.ID); err != nil || es[len(es)-1].Detail != "on a1:0; resumed" || es[len(es)-1].Run != run1 {
			t.Errorf("history after the resume: %+v, %v; want run %d running on a1:0; resumed", es, err, run1)
		}
		if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run1}, models.JobPreempted, nil, "preempted", usage.Service{}, t0.Add(20*time.Second)); err != nil {
			t.Fatal(err)
		}
		run2, err := s.MarkStarted(ctx, j.ID, []string{"a2:0"}, t0.Add(30*time.Second))
		if err != nil || run2 != run1+1 {
			t.Fatalf("second start: run %d, err %v", run2, err)
		}
		if _, err := s.MarkResumed(ctx, job.RunRef{Job: j.ID, Run: run1}, []string{"a1:0"}, "resumed", t0.Add(31*time.Second)); !errors.Is(err, models.ErrConflict) {
			t.Errorf("resume a replaced run: err = %v, want ErrConflict", err)
		}
		code := 0
		if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run2}, models.JobSucceeded, &code, "", usage.Service{}, t0.Add(40*time.Second)); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Runs(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Fatalf("runs = %+v, want 2", rs)
		}
		if r := rs[0]; r.Run != 1 || r.State != models.JobPreempted || r.EndedAt == nil || !r.EndedAt.Equal(t0.Add(20*time.Second)) || r.Placement != "a1:0" {
			t.Errorf("run 1 = %+v, want preempted at +20s on a1:0", r)
		}
		if r := rs[1]; r.Run != 2 || r.State != models.JobSucceeded || r.ExitCode == nil || *r.ExitCode != 0 || r.Placement != "a2:0" {
			t.Errorf("run 2 = %+v, want succeeded with code 0 on a2:0", r)
		}
		es, err := s.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if last := es[len(es)-1]; last.Run != 2 || last.State != models.JobSucceeded {
			t.Errorf("last event = %+v, want run 2 succeeded", last)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		// 1..20 s (the run went on while a1 was away) and 30..40 s.
		if got.ExecutedS != 29 {
			t.Errorf("executed %v s, want 29", got.ExecutedS)
		}
	})
}

// TestTakenBackRunEndedBeforeItsRecord: a run taken back when its machine
// returned, whose exit (kept by the machine) says it ended before the end
// its record had when the server took the machine for lost, counts up to
// its exit: its record ends then, and the job's time is the run's.
func TestTakenBackRunEndedBeforeItsRecord(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		j := &models.Job{Name: "r", Team: "vision", User: "alice", GPUs: 2, SubmittedAt: t0}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		run, err := s.MarkStarted(ctx, j.ID, []string{"a1:0", "a1:1"}, t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ref := job.RunRef{Job: j.ID, Run: run}
		if err := s.MarkStopped(ctx, ref, models.JobQueued, nil, "requeued: node a1 lost", usage.Service{}, t0.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkResumed(ctx, ref, []string{"a1:0", "a1:1"}, "resumed", t0.Add(14*time.Second)); err != nil {
			t.Fatal(err)
		}
		code := 0
		if err := s.MarkStopped(ctx, ref, models.JobSucceeded, &code, "", usage.Service{}, t0.Add(7*time.Second)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ExecutedS != 6 || got.AttainedService != 12 {
			t.Errorf("executed %v s, service %v GPU-s; want 6 and 12 (1..7 s on 2 GPUs)", got.ExecutedS, got.AttainedService)
		}
		rs, err := s.Runs(ctx, j.ID)
		if err != nil || len(rs) != 1 || rs[0].EndedAt == nil || !rs[0].EndedAt.Equal(t0.Add(7*time.Second)) || rs[0].State != models.JobSucceeded {
			t.Errorf("runs %+v (err %v); want run 1 alone, succeeded at +7s", rs, err)
		}
	})
}
