package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/enginestore"
	"github.com/gpuportal/gpuportal/models"
)

// fakeHoldingNode is a 4-GPU machine that runs the runs it is told of and
// starts nothing.
type fakeHoldingNode struct {
	mu   sync.Mutex
	runs []job.RunRef
}

func (n *fakeHoldingNode) Name() string { return "rsv-0" }
func (n *fakeHoldingNode) Devices() []gpu.Device {
	out := make([]gpu.Device, 4)
	for i := range out {
		out[i] = gpu.Device{Index: i, UUID: fmt.Sprint("GPU-r", i), MemMiB: 16384}
	}
	return out
}
func (n *fakeHoldingNode) Resources() (int, int64) { return 8, 64 << 10 }
func (n *fakeHoldingNode) Start(context.Context, job.Spec) error {
	return fmt.Errorf("fake node starts nothing")
}
func (n *fakeHoldingNode) Stop(context.Context, job.RunRef) error { return nil }
func (n *fakeHoldingNode) Running() []job.RunRef {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.runs)
}
func (n *fakeHoldingNode) Sample(at time.Time) []gpu.Sample {
	out := make([]gpu.Sample, 4)
	for i := range out {
		out[i] = gpu.Sample{At: at, Index: i, MemMiB: 16384}
	}
	return out
}

// TestReservationInTheAPI: a 4-GPU job that has waited past the bound
// while a job with a time limit holds a GPU of the only machine has that
// machine's GPUs reserved: the API gives the job a reservation object
// (its GPUs, and until when others may use them: when the limit ends),
// and its page and reason name the GPUs.
func TestReservationInTheAPI(t *testing.T) {
	t.Parallel()
	ts, holder, big, started := newReservingServer(t)
	var j api.Job
	for deadline := time.Now().Add(10 * time.Second); ; {
		rec := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", big.ID), "")
		j = api.Job{}
		if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
			t.Fatalf("GET job: %v %s", err, rec.Body)
		}
		if j.Reservation != nil && strings.Contains(j.Reason, "reserved") || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The holder's limit ends it an hour after it started.
	end := started.Add(time.Hour)
	r := j.Reservation
	if r == nil || r.Count != 4 || !slices.Equal(r.GPUs, []string{"rsv-0:0", "rsv-0:1", "rsv-0:2", "rsv-0:3"}) ||
		r.From.Sub(end).Abs() > 2*time.Second {
		t.Fatalf("reservation %+v, want rsv-0:0-3 from %v (reason %q)", r, end, j.Reason)
	}
	// The reason names the GPUs and no time: when the job starts is
	// its forecast's to say, shown beside it.
	want := "GPUs rsv-0:0-3 reserved for this job"
	if !containsText(j.Reason, want) || strings.Contains(j.Reason, want+" from") || strings.Contains(j.Reason, "expected free") {
		t.Errorf("reason %q, want it to say %q and no time", j.Reason, want)
	}
	page := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/jobs/%d", big.ID), "").Body.String()
	if !containsText(page, want) {
		t.Errorf("the job's page does not say %q", want)
	}
	rec := ts.do(t, "bob", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", holder.ID), "")
	var h api.Job
	if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil || h.Reservation != nil {
		t.Errorf("the running holder: reservation %+v, %v", h.Reservation, err)
	}
}

// newReservingServer is a test server whose engine (fjf, a 300 s bound)
// runs over one 4-GPU machine, rsv-0, where holder (bob's, with a limit
// of an hour, started at started, half an hour ago) holds GPU 0, while
// big (alice's, 4 GPUs) has waited 10 minutes: the engine reserves
// rsv-0:0-3 for big from the end of holder's limit.
func newReservingServer(t *testing.T) (ts *testServer, holder, big *models.Job, started time.Time) {
	t.Helper()
	ctx := context.Background()
	var eng *engine.Engine
	ts = newTestServer(t, func(c *testConfig) {
		sc, err := sched.New(sched.Config{Policy: "fjf", ReserveAfterS: 300})
		if err != nil {
			t.Fatal(err)
		}
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		if eng, err = engine.New(engine.Config{Store: enginestore.New(c.Store), Scheduler: sc, Logger: quiet,
			Interval: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		c.Engine = eng
	})
	now := time.Now()
	holder = &models.Job{Name: "holder", Team: "nlp", User: "bob", GPUs: 1, SimDuration: 3600, SubmittedAt: now.Add(-time.Hour),
		TimeLimitS: 3600}
	big = &models.Job{Name: "big", Team: "vision", User: "alice", GPUs: 4, SimDuration: 60, SubmittedAt: now.Add(-10 * time.Minute)}
	for _, j := range []*models.Job{holder, big} {
		if err := ts.store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	// Three jobs that ran 40 minutes each and finished before: the
	// history a start forecast needs (forecast.DefaultMinHistory).
	for i := range 3 {
		at := now.Add(-3*time.Hour + time.Duration(i)*time.Minute)
		f := &models.Job{Name: fmt.Sprintf("done-%d", i), Team: "nlp", User: "bob", GPUs: 1, SimDuration: 2400, SubmittedAt: at}
		if err := ts.store.CreateJob(ctx, f); err != nil {
			t.Fatal(err)
		}
		run, err := ts.store.MarkStarted(ctx, f.ID, []string{fmt.Sprintf("rsv-0:%d", i)}, at)
		if err != nil {
			t.Fatal(err)
		}
		zero := 0
		if err := ts.store.MarkStopped(ctx, job.RunRef{Job: f.ID, Run: run}, models.JobSucceeded, &zero, "exited 0", usage.Service{}, at.Add(40*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	started = now.Add(-30 * time.Minute)
	run, err := ts.store.MarkStarted(ctx, holder.ID, []string{"rsv-0:0"}, started)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = eng.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	node := &fakeHoldingNode{runs: []job.RunRef{{Job: holder.ID, Run: run}}}
	if err := eng.AddNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	return ts, holder, big, started
}

// TestClusterShowsReservation (issue 30): the cluster page lists the
// reservations and marks each reserved GPU with its job and the job's
// start forecast, the one the API gives the job (not the reservation's
// own estimate, which would contradict it), on the leader from its
// engine, and a follower replica, which runs no engine and knows no
// machine, lists the same from the reservations and forecasts the
// leader stored; so do their live parts (/cluster/live). The list says
// until when other jobs may start on the GPUs: the holder's limit.
func TestClusterShowsReservation(t *testing.T) {
	t.Parallel()
	ts, _, big, started := newReservingServer(t)
	fol := followerOf(t, ts, sched.Config{Policy: "fjf", ReserveAfterS: 300})

	// The forecast the API gives the job, once the engine has made one.
	forecastShort := func(srv *testServer) string {
		rec := srv.do(t, "admin", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", big.ID), "")
		var j api.Job
		if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
			t.Fatalf("GET job: %v %s", err, rec.Body)
		}
		if j.Forecast == nil || j.Forecast.State != api.ForecastExpected {
			return ""
		}
		return j.Forecast.Short(time.Now(), time.Local)
	}
	// The holder's limit ends it an hour after it started.
	backfill := "another job starts on them only if its time limit ends it by " + api.Clock(started.Add(time.Hour), time.Now(), time.Local)
	for _, tc := range []struct {
		name    string
		ts      *testServer
		perGPU  int // GPUs marked reserved: the follower shows no machine
		targets []string
	}{
		{"leader", ts, 4, []string{"/cluster", "/cluster/live"}},
		{"follower", fol, 0, []string{"/cluster", "/cluster/live"}},
	} {
		for _, target := range tc.targets {
			// The page is read between two reads of the API's forecast:
			// it must say one of them (a new forecast may come between).
			var page, text, listed string
			for deadline := time.Now().Add(20 * time.Second); ; {
				before := forecastShort(tc.ts)
				page = tc.ts.do(t, "admin", http.MethodGet, target, "").Body.String()
				after := forecastShort(tc.ts)
				for _, f := range []string{before, after} {
					if f == "" {
						continue
					}
					text = fmt.Sprintf("reserved for job %d, expected to start %s", big.ID, f)
					if listed = "GPUs rsv-0:0-3 " + text; containsText(page, listed) {
						break
					}
				}
				if containsText(page, listed) || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !containsText(page, listed) {
				t.Fatalf("%s %s: does not list %q, the job's forecast in the API", tc.name, target, listed)
			}
			t.Logf("%s %s lists %q", tc.name, target, listed)
			if !containsText(page, backfill) {
				t.Errorf("%s %s: does not say %q", tc.name, target, backfill)
			}
			if got := strings.Count(page, text+"</div>"); got != tc.perGPU {
				t.Errorf("%s %s: %d GPUs marked %q, want %d", tc.name, target, got, text, tc.perGPU)
			}
			if says := strings.Contains(page, `id="cluster-follower"`); says != (tc.ts == fol) {
				t.Errorf("%s %s: says it is a follower: %v", tc.name, target, says)
			}
		}
	}
}
