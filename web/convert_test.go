package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

func TestFmtGPUs(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0", 3: "3", 2.5: "2.5", 1.0 / 3: "0.33", 2.999999999: "3", 0.125: "0.13", -0.0001: "0"} {
		if got := fmtGPUs(in); got != want {
			t.Errorf("fmtGPUs(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestRunningJobFiguresAgree runs a job for 30 s (by its start time) and
// reads its executed time and attained service from the API, its page,
// the queues and its team's page: all include the run in progress.
func TestRunningJobFiguresAgree(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	start := time.Now().Add(-30 * time.Second)
	j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 2, SimDuration: 600, SubmittedAt: start}
	if err := ts.store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.MarkStarted(ctx, j.ID, []string{"n:0", "n:1"}, start); err != nil {
		t.Fatal(err)
	}
	within := func(what string, got, want, slack float64) {
		t.Helper()
		if got < want || got > want+slack {
			t.Errorf("%s = %v, want %v to %v", what, got, want, want+slack)
		}
	}

	var aj api.Job
	if rec := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", j.ID), ""); rec.Code != http.StatusOK ||
		json.Unmarshal(rec.Body.Bytes(), &aj) != nil {
		t.Fatalf("GET job: %d %s", rec.Code, rec.Body)
	}
	within("API executed_s", aj.ExecutedS, 30, 5)
	within("API attained_service_gpu_s", aj.AttainedService, 60, 10)
	if aj.HeldGPUs != 2 || aj.Borrowed || aj.AsOf == nil {
		t.Errorf("API: held %v, borrowed %v, as_of %v; want 2 GPUs within vision's guarantee of 2", aj.HeldGPUs, aj.Borrowed, aj.AsOf)
	}

	page := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/jobs/%d", j.ID), "").Body.String()
	m := regexp.MustCompile(`id="job-attained">(\d+) GPU-seconds<`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("job page has no attained service:\n%s", page)
	}
	a, _ := strconv.ParseFloat(m[1], 64)
	within("page's attained service", a, 60, 10)
	if !regexp.MustCompile(`id="job-executed">(3\d)s<`).MatchString(page) {
		t.Errorf("job page's executed time is not 30-39s")
	}

	var q api.Queues
	if rec := ts.do(t, "alice", http.MethodGet, "/api/v1/queues", ""); json.Unmarshal(rec.Body.Bytes(), &q) != nil || len(q.Queues[0].Jobs) != 1 {
		t.Fatalf("queues: %s", rec.Body)
	}
	within("queues' attained service", q.Queues[0].Jobs[0].AttainedService, 60, 10)

	var team api.Team
	if rec := ts.do(t, "alice", http.MethodGet, "/api/v1/teams/vision", ""); json.Unmarshal(rec.Body.Bytes(), &team) != nil {
		t.Fatalf("team: %s", rec.Body)
	}
	if team.InUseGPUs != 2 || team.BorrowedGPUs != 0 || len(team.Members) == 0 || team.Members[0].User != "alice" {
		t.Fatalf("team = %+v", team)
	}
	within("alice's usage on the team page", team.Members[0].UsageGPUSeconds, 60, 10)
}

// TestEmptyListsAreArrays: a list with nothing in it is [], never null.
func TestEmptyListsAreArrays(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t) // no machine is connected
	for _, path := range []string{"/api/v1/gpus", "/api/v1/jobs?state=running", "/api/v1/nodes"} {
		rec := ts.do(t, "alice", http.MethodGet, path, "")
		if got := strings.TrimSpace(rec.Body.String()); rec.Code != http.StatusOK || got != "[]" {
			t.Errorf("GET %s: %d %s; want 200 []", path, rec.Code, got)
		}
	}
}
