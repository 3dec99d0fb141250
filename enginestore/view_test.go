package enginestore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestViewReadsWhatAWholeReadReads changes jobs every way the engine
// meets between two passes (a submission, a start, a queue move, an end, a
// cancel, a cancel asked from another replica, a hold, a dependency that
// ends) and after each requires the jobs read from the changes since the
// last read to be those a whole read gives.
func TestViewReadsWhatAWholeReadReads(t *testing.T) {
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if s.view == nil {
			t.Fatal("New gave a store without a view")
		}
		whole := Store{Store: s.Store} // no view: every read whole
		if _, err := s.CreateTeam(ctx, "vision", 8); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateUser(ctx, "bob", "s3cret", models.RoleResearcher, "vision"); err != nil {
			t.Fatal(err)
		}
		submit := func(user string, deps ...string) int64 {
			t.Helper()
			j := &models.Job{Name: "j", Team: "vision", User: user, GPUs: 1, SimDuration: 60, SubmittedAt: time.Now(), Dependencies: deps}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			return j.ID
		}
		var ids []int64
		for range 5 {
			ids = append(ids, submit("alice"))
		}
		bobs := submit("bob")
		dependent := submit("alice", fmt.Sprintf("afterok:%d", ids[0]))
		check := func(step string) {
			t.Helper()
			got, err := s.UnfinishedEngineJobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want, err := whole.UnfinishedEngineJobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: the view read\n%+v\nwant\n%+v", step, got, want)
			}
		}
		check("first read")
		// The whole read applied the rows it read: the next read reads
		// whole only those changed since, though all are in its window.
		for _, id := range append(ids, bobs, dependent) {
			if _, ok := s.view.applied[id]; !ok {
				t.Errorf("job %d, read whole just now, is not applied: the next read reads it again", id)
			}
		}
		fullAt := s.view.fullAt
		run, err := s.Store.MarkStarted(ctx, ids[0], []string{"n0:0"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		check("a start")
		code143 := 143
		asked := time.Now().Truncate(time.Second).UTC()
		req := job.StopRequest{Run: run, To: job.Preempted, Reason: "preempted for job 9", Code: &code143, At: asked}
		if err := s.MarkStopping(ctx, ids[0], req); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkStopping(ctx, ids[0], job.StopRequest{Run: run + 1, To: job.Cancelled}); !errors.Is(err, job.ErrConflict) {
			t.Errorf("a request to stop a run that is not the job's: err = %v, want a conflict", err)
		}
		check("a request to stop a run")
		if got := engineJobOf(t, s, ids[0]).Stop; got == nil || got.Run != run || got.To != job.Preempted || got.Reason != req.Reason ||
			got.Code == nil || *got.Code != 143 || !got.At.Equal(asked) {
			t.Errorf("the job's stop request reads %+v, want %+v", got, req)
		}
		if err := s.SetQueueStates(ctx, map[int64]sched.QueueState{ids[1]: {Index: 1, Since: 10}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetReasons(ctx, map[int64]string{ids[2]: "needs 1 GPU; 0 free"}); err != nil {
			t.Fatal(err)
		}
		check("a queue move and a reason")
		newID := submit("alice")
		check("a submission")
		code := 0
		if err := s.Store.MarkStopped(ctx, job.RunRef{Job: ids[0], Run: run}, models.JobSucceeded, &code, "", usage.Service{}, time.Now()); err != nil {
			t.Fatal(err)
		}
		check("an end, and the dependency it ends")
		if err := s.Cancel(ctx, ids[3], "cancelled by alice", time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.RequestCancel(ctx, ids[4], "cancelled by alice on another replica", time.Now()); err != nil {
			t.Fatal(err)
		}
		check("a cancel, and a cancel asked")
		if err := s.SetUnixName(ctx, "bob", "bob2"); err != nil {
			t.Fatal(err)
		}
		check("an owner's Unix account changed")
		if got := engineJobOf(t, s, bobs).Account; got != "bob2" {
			t.Errorf("bob's job runs as %q, want bob2", got)
		}
		if _, err := s.DisableUser(ctx, "bob", "admin", time.Now()); err != nil {
			t.Fatal(err)
		}
		check("a hold")
		js, err := s.UnfinishedEngineJobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int64]engine.Job{}
		for _, j := range js {
			seen[j.ID] = j
		}
		if _, ok := seen[bobs]; ok {
			t.Error("a held job is read")
		}
		if _, ok := seen[newID]; !ok {
			t.Error("the submission is not read")
		}
		if d := seen[dependent].Deps; len(d) != 1 || d[0].State != job.Succeeded {
			t.Errorf("the dependent job's dependencies %+v, want its dependency succeeded", d)
		}
		// The caller may change what it is given: the view keeps its own.
		js[0].Deps = append(js[0].Deps, engine.Dep{State: job.Failed})
		js[1].State, js[1].Account = job.Failed, "mallory"
		_ = append(js[:0], js[2:]...) // a filter of the pass's, in the array it was given
		check("after the caller changed its copy")
		if s.view.fullAt != fullAt {
			t.Error("the view read every job again: the test covers only whole reads")
		}
	})
}

// TestMergeKeepsTheJobsByID applies random changes (jobs that change,
// leave, join, come back after they left, and rows of jobs the view never
// had that are not to be scheduled) to a random view, some of whose jobs
// left in earlier merges, and requires what a map of the jobs by ID,
// sorted, gives, both as the engine is given them (give) and once the
// jobs that left are dropped (dropLeft).
func TestMergeKeepsTheJobsByID(t *testing.T) {
	s := Store{}
	rng := rand.New(rand.NewPCG(33, 2))
	states := []job.State{models.JobQueued, models.JobRunning, models.JobSucceeded, models.JobCancelled}
	for round := range 500 {
		var view []engine.Job
		want := map[int64]job.State{}
		for id := int64(1); id <= 60; id++ {
			switch rng.IntN(3) {
			case 0:
				st := states[rng.IntN(2)]
				view = append(view, engine.Job{ID: id, State: st})
				want[id] = st
			case 1:
				view = append(view, engine.Job{ID: -id, State: models.JobQueued}) // left
			}
		}
		var changed []models.Job
		for id := int64(1); id <= 70; id++ {
			if rng.IntN(4) == 0 {
				st := states[rng.IntN(len(states))]
				changed = append(changed, models.Job{ID: id, State: st})
				if st == models.JobQueued || st == models.JobRunning {
					want[id] = st
				} else {
					delete(want, id)
				}
			}
		}
		if rng.IntN(2) == 0 {
			rng.Shuffle(len(changed), func(i, j int) { changed[i], changed[j] = changed[j], changed[i] })
		}
		merged := s.merge(view, changed)
		if !slices.IsSortedFunc(merged, func(a, b engine.Job) int { return cmp.Compare(abs(a.ID), abs(b.ID)) }) {
			t.Fatalf("round %d: the merge is out of order", round)
		}
		ids := slices.Sorted(maps.Keys(want))
		v := &jobView{jobs: slices.Clone(merged)}
		for _, got := range [][]engine.Job{v.give(), dropLeft(merged)} {
			if len(got) != len(ids) {
				t.Fatalf("round %d: %d jobs after the merge, want %d", round, len(got), len(ids))
			}
			for i, id := range ids {
				if got[i].ID != id || got[i].State != want[id] {
					t.Fatalf("round %d: job %d is %d %s, want %d %s", round, i, got[i].ID, got[i].State, id, want[id])
				}
			}
		}
	}
}

// engineJobOf is job id as s gives it to the engine.
func engineJobOf(t *testing.T, s Store, id int64) engine.Job {
	t.Helper()
	js, err := s.UnfinishedEngineJobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("job %d not read", id)
	return engine.Job{}
}

// TestViewKeepsOneCopyOfEachName: the jobs the view gives carry one copy
// of each team and owner name and the job package's state strings,
// whether they came from a whole read or from the rows changed since, so
// that a pass reading every job's names and state reads the same few
// strings.
func TestViewKeepsOneCopyOfEachName(t *testing.T) {
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 8); err != nil {
			t.Fatal(err)
		}
		submit := func() {
			t.Helper()
			j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Now()}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		check := func(step string, want int) {
			t.Helper()
			js, err := s.UnfinishedEngineJobs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(js) != want {
				t.Fatalf("%s: %d jobs, want %d", step, len(js), want)
			}
			for _, j := range js {
				for _, c := range []struct{ name, got, want string }{
					{"team", j.Team, js[0].Team}, {"owner", j.User, js[0].User}, {"state", string(j.State), string(job.Queued)},
				} {
					if c.got != c.want || unsafe.StringData(c.got) != unsafe.StringData(c.want) {
						t.Errorf("%s: job %d's %s %q is a copy of its own", step, j.ID, c.name, c.got)
					}
				}
			}
		}
		submit()
		submit()
		check("whole read", 2)
		submit()
		check("changes since", 3)
	})
}
