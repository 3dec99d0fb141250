package models_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/models"
)

func TestMarkRequeuedKeepsTheLargerEstimate(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openStore(t, dsn)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		if _, err := s.CreateTeam(ctx, "vision", 2); err != nil {
			t.Fatal(err)
		}
		j := &models.Job{Name: "shared", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: now,
			Sharing: true, GPUFraction: 0.5, MemPersistentMiB: 1000, MemEphemeralMiB: 4000, MemSource: "declared", BatchSize: 32}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkStarted(ctx, j.ID, []string{"n:0"}, now); err != nil {
			t.Fatal(err)
		}
		est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 9000, Source: memest.Measured}
		rq := job.Requeue{Estimate: est, Node: "n", At: now.Add(time.Minute), Backoff: 30 * time.Second}
		if out, err := s.MarkRequeued(ctx, job.RunRef{Job: j.ID, Run: 1}, rq); err != nil || out.Stalls != 0 || out.Held {
			t.Fatalf("requeue: %+v, %v; want progress", out, err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != models.JobQueued || got.Failures != 0 || got.RetryAt != nil || got.ExitCode != nil || len(got.Placement) != 0 {
			t.Fatalf("job %+v: want queued, no failure, no backoff", got)
		}
		if got.MemoryEstimate() != est || !got.Sharing || got.GPUFraction != 0.5 || got.BatchSize != 32 || got.ExecutedS != 60 {
			t.Fatalf("job %+v: want the new estimate, its sharing fields kept and a minute executed", got)
		}
		es, err := s.JobEvents(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if last := es[len(es)-1]; last.State != models.JobQueued || last.Detail != "outgrew its lane: requeued with E=9000 MiB, P=1000 MiB (on n)" {
			t.Fatalf("history ends with %+v", last)
		}
		if _, err := s.MarkRequeued(ctx, job.RunRef{Job: j.ID, Run: 1}, rq); err == nil {
			t.Fatal("requeued a job that is not running")
		}
	})
}

// TestRequeuesWithoutProgressHold: each requeue with no larger estimate
// than the run started with backs the job off (RetryAt) and counts; the
// fifth in a row holds it: it stays queued, out of the engine's jobs,
// with a reason that says what to do. A held job with a cancel asked
// while it ran reaches the engine, which carries the cancel out.
func TestRequeuesWithoutProgressHold(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openStore(t, dsn)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		if _, err := s.CreateTeam(ctx, "vision", 2); err != nil {
			t.Fatal(err)
		}
		submit := func(name string) int64 {
			t.Helper()
			j := &models.Job{Name: name, Team: "vision", User: "alice", GPUs: 1, Command: []string{"python3", "train.py"}, SubmittedAt: now,
				Sharing: true, MemPersistentMiB: 1000, MemEphemeralMiB: 4096, MemSource: "declared"}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			return j.ID
		}
		// requeue starts job id and requeues it with E 4,096 again; cancel
		// asks for its cancel while it runs.
		requeue := func(id int64, cancel bool) job.RequeueOutcome {
			t.Helper()
			now = now.Add(time.Minute)
			run, err := s.MarkStarted(ctx, id, []string{"n:0"}, now)
			if err != nil {
				t.Fatal(err)
			}
			if cancel {
				if err := s.RequestCancel(ctx, id, "cancelled by alice", now); err != nil {
					t.Fatal(err)
				}
			}
			now = now.Add(10 * time.Second)
			rq := job.Requeue{Estimate: memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4096, Source: memest.Measured},
				Node: "n", At: now, Backoff: 30 * time.Second}
			out, err := s.MarkRequeued(ctx, job.RunRef{Job: id, Run: run}, rq)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		inEngine := func(id int64) bool {
			t.Helper()
			js, err := s.JobsToSchedule(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(js, func(j models.Job) bool { return j.ID == id })
		}
		id := submit("asks")
		for i := 1; i < job.MaxRequeueStalls; i++ {
			out := requeue(id, false)
			got, err := s.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			wantAt := now.Add(30 * time.Second << (i - 1))
			if out.Stalls != i || got.RequeueStalls != i || got.RetryAt == nil || !got.RetryAt.Equal(wantAt) || got.Held() || got.Reason != out.Reason {
				t.Fatalf("stall %d: %+v, stored %d stalls, retry at %v, reason %q; want retry at %v", i, out, got.RequeueStalls, got.RetryAt, got.Reason, wantAt)
			}
			if !inEngine(id) {
				t.Fatalf("stall %d: a job waiting out its backoff is not the engine's", i)
			}
		}
		out := requeue(id, false)
		got, err := s.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !out.Held || !got.Held() || got.State != models.JobQueued || got.RetryAt != nil || got.Failures != 0 ||
			!strings.HasPrefix(got.Reason, "held: requeued 5 times in a row for outgrowing its lane") {
			t.Fatalf("fifth stall: %+v; job %+v: want held, queued, no failure, with the reason", out, got)
		}
		if inEngine(id) {
			t.Fatal("the engine sees a held job")
		}
		es, err := s.JobEvents(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if last := es[len(es)-1]; last.State != models.JobQueued || last.Detail != got.Reason {
			t.Fatalf("history ends with %+v, want the hold", last)
		}

		other := submit("asks-and-cancelled")
		for i := 1; i < job.MaxRequeueStalls; i++ {
			requeue(other, false)
		}
		if out := requeue(other, true); !out.Held {
			t.Fatalf("fifth stall: %+v, want held", out)
		}
		if !inEngine(other) {
			t.Fatal("a held job with a cancel request is not the engine's to cancel")
		}
	})
}

// TestRequeueProgressResetsStalls: a requeue with a larger estimate
// starts the count of stalls again.
func TestRequeueProgressResetsStalls(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openStore(t, dsn)
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		if _, err := s.CreateTeam(ctx, "vision", 2); err != nil {
			t.Fatal(err)
		}
		j := &models.Job{Name: "grows", Team: "vision", User: "alice", GPUs: 1, Command: []string{"train"}, SubmittedAt: now,
			Sharing: true, MemPersistentMiB: 1000, MemEphemeralMiB: 4000, MemSource: "declared"}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		for i, e := range []int64{4000, 4000, 5000, 5000} {
			run, err := s.MarkStarted(ctx, j.ID, []string{"n:0"}, now)
			if err != nil {
				t.Fatal(err)
			}
			rq := job.Requeue{Estimate: memest.Estimate{PersistentMiB: 1000, EphemeralMiB: e}, Node: "n", At: now, Backoff: time.Second}
			out, err := s.MarkRequeued(ctx, job.RunRef{Job: j.ID, Run: run}, rq)
			if want := []int{1, 2, 0, 1}[i]; err != nil || out.Stalls != want {
				t.Fatalf("requeue %d with E %d: %+v, %v; want %d stalls", i, e, out, err, want)
			}
		}
	})
}
