package app

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

func (e *fakeEngine) Preempt(context.Context, int64, string) error { return nil }

// preemptingEngine is a fakeEngine that records the jobs it preempts.
type preemptingEngine struct {
	*fakeEngine
	preempted []int64
}

func (e *preemptingEngine) Preempt(_ context.Context, id int64, _ string) error {
	e.preempted = append(e.preempted, id)
	return nil
}

// TestReclaimIdle: an idle batch job is preempted and a session
// cancelled, each giving back its GPUs times the time they were idle; a
// job no longer running is left alone.
func TestReclaimIdle(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	eng := &preemptingEngine{fakeEngine: &fakeEngine{}}
	f.app.cfg.Engine = eng
	batch := f.job(t, true)
	s := &models.Job{Name: "s", Team: "vision", User: "alice", GPUs: 1, SessionType: "jupyter", SubmittedAt: time.Now()}
	if err := f.store.CreateJob(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.MarkStarted(ctx, s.ID, []string{"gpu1:1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	session := s.ID
	ended := f.job(t, false)
	js, err := f.app.runningJobs(ctx)
	if err != nil || len(js) != 2 {
		t.Fatalf("running jobs: %d, %v; want 2", len(js), err)
	}
	now := time.Now()
	for _, j := range js {
		got, ok, err := f.app.reclaimIdle(ctx, &j, now.Add(-time.Hour), now)
		if err != nil || !ok || got != 3600 {
			t.Errorf("job %d: %v GPU-seconds, reclaimed %v, err %v; want 3600, true", j.ID, got, ok, err)
		}
	}
	if !slices.Equal(eng.preempted, []int64{batch}) || !slices.Equal(eng.cancelled, []int64{session}) {
		t.Errorf("preempted %v, cancelled %v; want [%d], [%d]", eng.preempted, eng.cancelled, batch, session)
	}
	j, err := f.store.Job(ctx, ended)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := f.app.reclaimIdle(ctx, j, now.Add(-time.Hour), now); ok || err != nil {
		t.Errorf("a job not running: reclaimed %v, err %v; want left alone", ok, err)
	}
}
