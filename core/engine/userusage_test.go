package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// userTeamStore adds users' usage to teamStore.
type userTeamStore struct {
	*teamStore
	loaded []UserUsage
	saved  []UserUsage
}

func (s *userTeamStore) UserUsages(context.Context) ([]UserUsage, error) { return s.loaded, nil }
func (s *userTeamStore) SetUserUsage(_ context.Context, u []UserUsage, _ time.Time) error {
	s.saved = u
	return nil
}

// A freed GPU of a team goes to the teammate who used less, not to the
// next job of the user sweeping, and users' usage is counted and saved.
func TestTeammateWithLessUsageGoesFirst(t *testing.T) {
	start := t0.Add(-time.Hour)
	running := func(id int64, idx int) Job {
		return Job{ID: id, Team: "nlp", User: "ann", GPUs: 1, State: job.Running,
			Placement: []gpu.Ref{{Node: "n0", Index: idx}}, LastStartAt: &start, SubmittedAt: start}
	}
	mem := newMemStore(running(1, 0), running(2, 1),
		Job{ID: 3, Team: "nlp", User: "ann", GPUs: 1, SubmittedAt: t0},
		Job{ID: 4, Team: "nlp", User: "bob", GPUs: 1, SubmittedAt: t0.Add(time.Second)})
	store := &userTeamStore{teamStore: &teamStore{memStore: mem, teams: []Team{{Name: "nlp", GuaranteeGPUs: 2}}},
		loaded: []UserUsage{{Team: "nlp", User: "ann", UsageGPUSeconds: 7200, UsageAt: t0}}}
	n := newFakeNode("n0", 2)
	n.running[1], n.running[2] = 1, 1
	e, clock := newTestEngine(t, mem, n)
	e.cfg.Store = store
	sc, err := sched.New(sched.Config{Policy: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	mustPass(t, e)
	delete(n.running, 1)
	e.testExit(context.Background(), exit("n0", 1, 0, clock.t))
	clock.t = clock.t.Add(time.Minute)
	mustPass(t, e)
	if mem.state(4) != job.Running || mem.state(3) == job.Running {
		t.Errorf("bob's job %s, ann's %s; want bob's started first", mem.state(4), mem.state(3))
	}
	var ann float64
	for _, u := range store.saved {
		if u.Team == "nlp" && u.User == "ann" {
			ann = u.UsageGPUSeconds
		}
	}
	if ann <= 7200*0.99 {
		t.Errorf("saved %+v; want ann's usage kept and counted", store.saved)
	}
	shares := e.UserShares("nlp")
	if len(shares) != 2 || shares[0].User != "ann" || shares[1].User != "bob" || !(shares[0].Factor < shares[1].Factor) {
		t.Errorf("user shares %+v; want ann below bob", shares)
	}
}
