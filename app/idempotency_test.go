package app

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// A submission retried with its Idempotency-Key returns the job the first
// stored, for each user apart; the key with another request is refused;
// a malformed key names the header.
func TestSubmitOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	alice, carol := Actor{User: f.users["alice"]}, Actor{User: f.users["carol"]}
	req := api.SubmitRequest{Name: "train", Team: "vision", GPUs: 1, Sim: &api.SimSpec{DurationS: 60}}

	first, replayed, err := f.app.SubmitOnce(ctx, alice, "k-1", req)
	if err != nil || replayed {
		t.Fatalf("first submission: %v, replayed %v", err, replayed)
	}
	again, replayed, err := f.app.SubmitOnce(ctx, alice, "k-1", req)
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("retry: job %v, replayed %v, %v; want job %d again", again, replayed, err, first.ID)
	}
	other := req
	other.GPUs = 2
	if _, _, err := f.app.SubmitOnce(ctx, alice, "k-1", other); outcome(err) != "conflict" || !strings.Contains(err.Error(), "another submission") {
		t.Errorf("the key with another request: %v, want a conflict", err)
	}
	if j, replayed, err := f.app.SubmitOnce(ctx, carol, "k-1", req); err != nil || replayed || j.ID == first.ID {
		t.Errorf("carol with alice's key: %v, replayed %v, %v; want a job of her own", j, replayed, err)
	}
	for _, bad := range []string{"with space", strings.Repeat("k", MaxIdempotencyKey+1), "é"} {
		_, _, err := f.app.SubmitOnce(ctx, alice, bad, req)
		var e *Error
		if outcome(err) != "invalid" || !errors.As(err, &e) || e.Field != "Idempotency-Key" {
			t.Errorf("key %q: %v, want invalid naming Idempotency-Key", bad, err)
		}
	}
	jobs, err := f.store.ListJobs(ctx, models.JobFilter{User: "alice"})
	if err != nil || len(jobs) != 1 {
		t.Errorf("alice has %d jobs (%v), want 1", len(jobs), err)
	}
}

// Retries that race (a client that gave up on a slow answer) still make
// one job; an array's retry returns its first task.
func TestSubmitOnceRacesAndArrays(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	alice := Actor{User: f.users["alice"]}
	req := api.SubmitRequest{Name: "race", Team: "vision", GPUs: 1, Sim: &api.SimSpec{DurationS: 60}}
	ids := make([]int64, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			j, _, err := f.app.SubmitOnce(ctx, alice, "race-key", req)
			if err != nil {
				t.Errorf("attempt %d: %v", i, err)
				return
			}
			ids[i] = j.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("8 racing attempts made jobs %v, want one", ids)
		}
	}

	arr := api.SubmitRequest{Name: "arr", Team: "vision", GPUs: 1, Array: "0-3", Sim: &api.SimSpec{DurationS: 60}}
	first, _, err := f.app.SubmitOnce(ctx, alice, "arr-key", arr)
	if err != nil {
		t.Fatal(err)
	}
	again, replayed, err := f.app.SubmitOnce(ctx, alice, "arr-key", arr)
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("array retry: %v, replayed %v, %v; want task %d", again, replayed, err, first.ID)
	}
	tasks, err := f.store.ArrayTasks(ctx, first.ArrayID)
	if err != nil || len(tasks) != 4 {
		t.Errorf("array has %d tasks (%v), want 4", len(tasks), err)
	}
}
