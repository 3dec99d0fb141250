package web

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// TestJobMomentMatchesMoment: a job converted with jobMoment, which reads
// only what the job shows, is the job converted with the whole moment:
// waiting, held, with dependencies, running on a shared GPU, finished; on
// the leader (the engine's forecasts and reasons) and on a follower (the
// stored forecasts).
func TestJobMomentMatchesMoment(t *testing.T) {
	for _, leader := range []bool{true, false} {
		name := map[bool]string{true: "leader", false: "follower"}[leader]
		t.Run(name, func(t *testing.T) {
			now := time.Now().Truncate(time.Second)
			ts := newTestServer(t, func(c *Config) {
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
			if err := ts.store.SetLatestForecasts(ctx, []models.Forecast{{JobID: ids[1], MadeAt: now, State: "likely",
				Earliest: &now, Likely: &now, Latest: &now, Reason: "stored"}}); err != nil {
				t.Fatal(err)
			}
			// What the comparison covers: a stored forecast on the
			// follower, and a GPU shared by two running jobs.
			conv := func(id int64) api.Job {
				j, err := ts.store.Job(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				jm, err := ts.jobMoment(ctx, j)
				if err != nil {
					t.Fatal(err)
				}
				return ts.jobOf(jm, j)
			}
			if f := conv(ids[1]).Forecast; !leader && (f == nil || f.Reason != "stored") {
				t.Errorf("follower: job %d's forecast = %+v, want the stored one", ids[1], f)
			}
			if h := conv(shared).HeldGPUs; h != 0.5 {
				t.Errorf("job %d holds %v GPUs, want 0.5 (it shares its GPU)", shared, h)
			}
			for _, id := range ids {
				j, err := ts.store.Job(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				m, err := ts.moment(ctx)
				if err != nil {
					t.Fatal(err)
				}
				jm, err := ts.jobMoment(ctx, j)
				if err != nil {
					t.Fatal(err)
				}
				if want, got := ts.jobOf(m, j), ts.jobOf(jm, j); !reflect.DeepEqual(got, want) {
					t.Errorf("job %d (%s, %s):\njobMoment %+v\nmoment    %+v", id, j.Name, j.State, got, want)
				}
			}
		})
	}
}
