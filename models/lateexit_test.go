package models_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestRecordLateExit: the exit of a run the server ended as lost, which
// its machine reports on its return, is kept on the run, and the job's
// history says how and when the run ended; a duplicate, an exit from
// another machine, a run whose end is known or still open change nothing.
func TestRecordLateExit(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		j := &models.Job{Name: "late", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: t0}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		back := t0.Add(45 * time.Second) // when a1 came back
		run1, err := s.MarkStarted(ctx, j.ID, []string{"a1:0"}, t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ref1 := job.RunRef{Job: j.ID, Run: run1}
		if ok, err := s.RecordLateExit(ctx, lateExit(ref1, "a1", 0, t0.Add(5*time.Second)), back, t0.Add(6*time.Second)); ok || err != nil {
			t.Errorf("late exit of a running run: %v, %v; want nothing recorded", ok, err)
		}
		if err := s.MarkStopped(ctx, ref1, models.JobQueued, nil, "requeued: node a1 lost, not back after 30s", usage.Service{}, t0.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		run2, err := s.MarkStarted(ctx, j.ID, []string{"a2:0"}, t0.Add(40*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := s.RecordLateExit(ctx, lateExit(ref1, "a2", 0, t0.Add(9*time.Second)), back, t0.Add(50*time.Second)); ok || err != nil {
			t.Errorf("late exit from a machine the run was not on: %v, %v; want nothing recorded", ok, err)
		}
		ended := t0.Add(9 * time.Second)
		if ok, err := s.RecordLateExit(ctx, lateExit(ref1, "a1", 0, ended), back, t0.Add(50*time.Second)); !ok || err != nil {
			t.Fatalf("late exit of the lost run: %v, %v; want it recorded", ok, err)
		}
		if ok, err := s.RecordLateExit(ctx, lateExit(ref1, "a1", 0, ended), back, t0.Add(51*time.Second)); ok || err != nil {
			t.Errorf("the same exit again: %v, %v; want nothing recorded", ok, err)
		}
		code := 3
		if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run2}, models.JobFailed, &code, "exit code 3 on a2", usage.Service{}, t0.Add(60*time.Second)); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.RecordLateExit(ctx, lateExit(job.RunRef{Job: j.ID, Run: run2}, "a2", 3, t0.Add(60*time.Second)), back, t0.Add(61*time.Second)); ok || err != nil {
			t.Errorf("an exit recorded already: %v, %v; want nothing recorded", ok, err)
		}
		rs, err := s.Runs(ctx, j.ID)
		if err != nil || len(rs) != 2 {
			t.Fatalf("runs %+v, %v", rs, err)
		}
		if rs[0].ExitCode == nil || *rs[0].ExitCode != 0 || rs[0].State != models.JobQueued || !rs[0].EndedAt.Equal(ended) {
			t.Errorf("run 1 = %+v; want its late exit code 0, still requeued, ended when its machine says (+9s), not at the loss (+10s)", rs[0])
		}
		// 1..9 s on a1 (the machine's word), 40..60 s on a2.
		if got, err := s.Job(ctx, j.ID); err != nil || got.ExecutedS != 28 || got.AttainedService != 28 {
			t.Errorf("job: executed %v s, service %v GPU-s (err %v); want 28 and 28", got.ExecutedS, got.AttainedService, err)
		}
		es, err := s.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		var notes []string
		for _, e := range es {
			if strings.Contains(e.Detail, "had ended on") {
				notes = append(notes, e.Detail)
				if e.Run != run1 {
					t.Errorf("the note is of run %d, want %d", e.Run, run1)
				}
			}
		}
		want := models.LateExitNote(lateExit(ref1, "a1", 0, ended), back)
		if len(notes) != 1 || notes[0] != want {
			t.Errorf("history notes %q; want once %q", notes, want)
		}
		if !strings.Contains(want, "run 1 had ended on a1 at ") || !strings.Contains(want, "with success (exit code 0) while the machine was cut off") {
			t.Errorf("note %q", want)
		}
		stopped := lateExit(ref1, "a1", -1, back.Add(time.Second))
		stopped.Err = "stopped by its agent"
		if n := models.LateExitNote(stopped, back); !strings.Contains(n, "run 1 was still running on a1 when the machine came back at ") || !strings.Contains(n, "with exit code -1 (stopped by its agent)") {
			t.Errorf("note of a run stopped after its machine came back: %q", n)
		}
	})
}

// lateExit is the exit of run ref on node, ended at at with code.
func lateExit(ref job.RunRef, node string, code int, at time.Time) job.Exit {
	return job.Exit{JobID: ref.Job, Run: ref.Run, Node: node, ExitCode: code, At: at}
}
