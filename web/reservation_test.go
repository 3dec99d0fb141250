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
// (its GPUs, from when the limit ends), and its page and reason say so.
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
	want := "GPUs rsv-0:0-3 reserved for you from " + r.From.Local().Format("15:04")
	if !containsText(j.Reason, want) {
		t.Errorf("reason %q, want it to say %q", j.Reason, want)
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
// reservations and marks each reserved GPU with its job, on the leader
// from its engine, and a follower replica, which runs no engine and
// knows no machine, lists the same from the reservations the leader
// stored; so do their live parts (/cluster/live).
func TestClusterShowsReservation(t *testing.T) {
	t.Parallel()
	ts, _, big, started := newReservingServer(t)
	fol := followerOf(t, ts, sched.Config{Policy: "fjf", ReserveAfterS: 300})

	// The holder's limit ends it an hour after it started.
	text := fmt.Sprintf("reserved for job %d from %s", big.ID, started.Add(time.Hour).Local().Format("15:04"))
	listed := "GPUs rsv-0:0-3 " + text
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
			var page string
			for deadline := time.Now().Add(10 * time.Second); ; {
				page = tc.ts.do(t, "admin", http.MethodGet, target, "").Body.String()
				if containsText(page, listed) || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !containsText(page, listed) {
				t.Errorf("%s %s: does not list %q", tc.name, target, listed)
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
