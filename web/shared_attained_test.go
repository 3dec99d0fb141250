package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// TestSharedJobFiguresAgree: two jobs of different teams share a GPU
// for 2 minutes (issue 36 saw "Attained service 120 GPU-s" over 2
// minutes on half a GPU). Each attained half a GPU over that time, and
// the API, its page, the queues and /metrics say the same
// (TestMetricsNames checks that the shares sum by team).
func TestSharedJobFiguresAgree(t *testing.T) {
	ts := newTestServer(t, func(c *testConfig) { c.MetricsUserLabels = true })
	ctx := context.Background()
	start := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	var ids []int64
	for _, o := range []struct{ user, team string }{{"alice", "vision"}, {"bob", "nlp"}} {
		j := &models.Job{Name: "shared", Team: o.team, User: o.user, GPUs: 1, SimDuration: 600, SubmittedAt: start, Sharing: true}
		if err := ts.store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		run, err := ts.store.MarkStarted(ctx, j.ID, []string{"n:0"}, start)
		if err != nil {
			t.Fatal(err)
		}
		// What the engine's pass records (core/engine, held.go): half the
		// GPU each from the start.
		if err := ts.store.SetHeld(ctx, []models.Held{{Ref: job.RunRef{Job: j.ID, Run: run}, GPUs: 0.5, At: start}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	a := ids[0]
	// Every figure is read after before and before after: half a GPU
	// over the time run lies between.
	before := time.Since(start).Seconds()
	within := func(what string, got float64) {
		t.Helper()
		after := time.Since(start).Seconds()
		if got < 0.5*before-1e-6 || got > 0.5*after+1e-6 {
			t.Errorf("%s = %v GPU-seconds, want half a GPU over %v to %v s", what, got, before, after)
		}
	}

	var aj api.Job
	if rec := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", a), ""); rec.Code != http.StatusOK ||
		json.Unmarshal(rec.Body.Bytes(), &aj) != nil {
		t.Fatalf("GET job: %d %s", rec.Code, rec.Body)
	}
	within("API attained_service_gpu_s", aj.AttainedService)
	if d := aj.AttainedService - 0.5*aj.ExecutedS; d > 1e-6 || d < -1e-6 || aj.HeldGPUs != 0.5 {
		t.Errorf("API: attained %v in %v s, held %v: want half of it on half a GPU", aj.AttainedService, aj.ExecutedS, aj.HeldGPUs)
	}

	page := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/jobs/%d", a), "").Body.String()
	m := regexp.MustCompile(`id="job-attained">(\d+) GPU-seconds<`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("job page has no attained service:\n%s", page)
	}
	// The page rounds to whole GPU-seconds (%.0f): its figure lies
	// between the rounded bounds.
	p, _ := strconv.ParseFloat(m[1], 64)
	if after := time.Since(start).Seconds(); p < math.Round(0.5*before) || p > math.Round(0.5*after) {
		t.Errorf("page's attained service %v, want half of %v to %v s, rounded", p, before, after)
	}

	var q api.Queues
	if rec := ts.do(t, "alice", http.MethodGet, "/api/v1/queues", ""); json.Unmarshal(rec.Body.Bytes(), &q) != nil {
		t.Fatalf("queues: %s", rec.Body)
	}
	n := 0
	for _, qu := range q.Queues {
		for _, qj := range qu.Jobs {
			if qj.ID == a {
				within("queues' attained service", qj.AttainedService)
				n++
			}
		}
	}
	if n != 1 {
		t.Errorf("job %d in the queues %d times, want once", a, n)
	}

	fams := scrape(t, ts)
	got, ok := value(fams, "gpuportal_job_attained_service_gpu_seconds", map[string]string{"job_id": itoa(a), "user": "alice", "team": "vision"})
	if !ok {
		t.Fatal("no attained service series for the job on /metrics")
	}
	within("/metrics attained service", got)
}
