package web

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/models"
)

// TestShownMomentMatchesMoment: jobs converted with shownMoment, which
// reads only what they show, are the jobs converted with the whole moment:
// waiting (with the engine's forecast on the leader, a stored one on a
// follower), held, with dependencies, running alone and on a shared GPU,
// the tasks of an array, finished; each alone (a job's page, API and
// topic), all of them at once (a page of the jobs list) and an array's
// tasks together (its page and API).
func TestShownMomentMatchesMoment(t *testing.T) {
	t.Parallel()
	for _, leader := range []bool{true, false} {
		name := map[bool]string{true: "leader", false: "follower"}[leader]
		t.Run(name, func(t *testing.T) {
			now := time.Now().Truncate(time.Second)
			ts := newTestServer(t, func(c *testConfig) {
				c.Now = func() time.Time { return now }
				c.Leader = func() bool { return leader }
			})
			ctx := context.Background()
			ids := ts.addJobs(t, 3, "queued", "nlp", "bob", nil)
			held := &models.Job{Name: "held", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: now, HoldReason: "held by admin"}
			if err := ts.store.CreateJob(ctx, held); err != nil {
				t.Fatal(err)
			}
			after := &models.Job{Name: "after", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: now,
				Dependencies: models.Strings{"afterok:" + strconv.FormatInt(ids[0], 10)}, Reason: "waits for job " + strconv.FormatInt(ids[0], 10)}
			if err := ts.store.CreateJob(ctx, after); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, held.ID, after.ID)
			ids = append(ids, ts.startedJob(t, "a", 1, []string{"n:0"}, now.Add(-time.Minute)))
			shared := ts.startedJob(t, "b", 1, []string{"n:0"}, now.Add(-time.Minute))
			ids = append(ids, shared)
			done := ts.newJob(t)
			if err := ts.store.Cancel(ctx, done, "cancelled", now); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, done)
			array, err := ts.store.ArrayTasks(ctx, ts.newArray(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ts.store.MarkStarted(ctx, array[0].ID, []string{"n:1"}, now.Add(-time.Minute)); err != nil {
				t.Fatal(err)
			}
			for _, task := range array {
				ids = append(ids, task.ID)
			}
			if err := ts.store.SetLatestForecasts(ctx, []models.Forecast{{JobID: ids[1], MadeAt: now, State: "likely",
				Earliest: &now, Likely: &now, Latest: &now, Reason: "stored"}}); err != nil {
				t.Fatal(err)
			}
			load := func(ids ...int64) []app.Job { return appJobs(t, ts.app, ids...) }
			full := func() *app.Moment {
				m, err := ts.app.Moment(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			shown := func(js ...app.Job) *app.Moment {
				m, err := ts.app.ShownMoment(ctx, js...)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			// What the comparison covers: a forecast (the engine's on the
			// leader, once it has made one; the stored one on a follower)
			// and a GPU shared by two running jobs.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				js := load(ids[1])
				f := ts.app.JobOf(shown(js...), &js[0]).Forecast
				if !leader && (f == nil || f.Reason != "stored") {
					t.Fatalf("follower: job %d's forecast = %+v, want the stored one", ids[1], f)
				}
				if f != nil && f.MadeAt != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("leader: job %d has no forecast from the engine: %+v", ids[1], f)
				}
			}
			js := load(shared)
			if h := ts.app.JobOf(shown(js...), &js[0]).HeldGPUs; h != 0.5 {
				t.Errorf("job %d holds %v GPUs, want 0.5 (it shares its GPU)", shared, h)
			}
			// The engine may forecast anew between two reads: what one
			// shownMoment shows is what a whole moment read just before
			// or just after it shows.
			agree := func(what string, js []app.Job) {
				t.Helper()
				before, m, after := full(), shown(js...), full()
				for i := range js {
					j := &js[i]
					got := ts.app.JobOf(m, j)
					if want := ts.app.JobOf(before, j); reflect.DeepEqual(got, want) {
						continue
					}
					if want := ts.app.JobOf(after, j); !reflect.DeepEqual(got, want) {
						t.Errorf("%s: job %d (%s, %s):\nshownMoment %+v\nmoment      %+v", what, j.ID, j.Name, j.State, got, want)
					}
				}
			}
			// The cluster page's figures: those of the running jobs alone.
			rm, err := ts.app.RunningMoment(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if fm := full(); !reflect.DeepEqual(rm.Figures, fm.Figures) {
				t.Errorf("runningMoment's figures %+v, moment's %+v", rm.Figures, fm.Figures)
			}
			for _, id := range ids {
				agree("alone", load(id))
			}
			agree("all at once", load(ids...))
			agree("the array", load(ids[len(ids)-len(array):]...))
		})
	}
}
