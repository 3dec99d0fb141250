package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

func TestQueuesHideOtherTeamsJobs(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	id := ts.newJob(t) // alice's, team vision
	for _, tc := range []struct {
		role     string
		wantName string
	}{{"alice", "j"}, {"lead", "j"}, {"bob", ""}, {"admin", "j"}} {
		var got api.Queues
		rec := ts.do(t, tc.role, http.MethodGet, "/api/v1/queues", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d", tc.role, rec.Code)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got.Policy != "fifo" || len(got.Queues) != 1 || len(got.Queues[0].Jobs) != 1 {
			t.Fatalf("queues = %+v", got)
		}
		j := got.Queues[0].Jobs[0]
		if j.ID != id || j.Name != tc.wantName || j.Team != "vision" {
			t.Errorf("%s sees %+v; want name %q", tc.role, j, tc.wantName)
		}
	}
}

func TestJCTStats(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	now := time.Now()
	for i, jct := range []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 40 * time.Hour} {
		start := now.Add(-jct)
		if i == 3 {
			start = now.Add(-70 * time.Hour) // ended 30h ago: outside the window
		}
		j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 1, SubmittedAt: start}
		if err := ts.store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		id := j.ID
		run, err := ts.store.MarkStarted(ctx, id, []string{"n:0"}, start)
		if err != nil {
			t.Fatal(err)
		}
		zero := 0
		end := start.Add(jct)
		if err := ts.store.MarkStopped(ctx, job.RunRef{Job: id, Run: run}, models.JobSucceeded, &zero, "", usage.Service{}, end); err != nil {
			t.Fatal(err)
		}
	}
	rec := ts.do(t, "alice", http.MethodGet, "/api/v1/stats/jct?window=24h", "")
	var st api.JCTStats
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("status %d: %v", rec.Code, err)
	}
	if st.Jobs != 3 || st.AvgS < 19.9 || st.AvgS > 20.1 || st.P95S < 29.9 || len(st.CDF) != 3 {
		t.Errorf("stats = %+v; want 3 jobs, avg 20s, p95 30s", st)
	}
	if rec := ts.do(t, "alice", http.MethodGet, "/api/v1/stats/jct?window=forever", ""); rec.Code != http.StatusBadRequest {
		t.Errorf("bad window: status %d", rec.Code)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.newJob(t)
	rec := ts.do(t, "anonymous", http.MethodGet, "/metrics", "")
	body := rec.Body.String()
	for _, want := range []string{
		`gpuportal_jobs{state="queued"} 1`,
		`gpuportal_queue_jobs{queue="0",status="waiting",team="vision"} 1`,
		`gpuportal_scheduler_passes_total`,
		`gpuportal_preemptions_total{cause="reclaim",team="vision"} 0`,
		`gpuportal_preemptions_total{cause="priority",team="nlp"} 0`,
		`gpuportal_reclaims_total{team="nlp"} 0`,
		`gpuportal_requeues_total{cause="node_lost"} 0`,
		`gpuportal_retries_total{cause="exit_code"} 0`,
		`gpuportal_scheduler_pass_duration_seconds_count`,
		`gpuportal_build_info{goversion="go`,
		`gpuportal_team_gpus_utilized{team="vision"} 0`,
		`gpuportal_gpus_utilized 0`,
		`gpuportal_agent_heartbeats_total 0`,
		`gpuportal_nodes{state="cordoned"} 0`,
		`gpuportal_websocket_clients 0`,
		`gpuportal_nodes{state="ready"} 0`,
		`gpuportal_gpus_in_use 0`,
		`gpuportal_team_gpus_in_use{team="vision"} 0`,
		`gpuportal_team_gpus_borrowed{team="nlp"} 0`,
		`gpuportal_team_gpus_guaranteed{team="vision"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The Queues page, the API's positions and each job's "N jobs ahead" are
// one order: the scheduler's (issue 30: the page listed waiting jobs by
// when they entered the queue, while a session with interactive priority
// went ahead of them).
func TestQueueOrderIsTheSchedulers(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	if err := ts.store.SetTeamSessionPolicy(ctx, "vision", models.SessionPolicy{SessionPriorityGPUs: 4}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Hour)
	var ids []int64
	for i := range 3 {
		j := &models.Job{Name: fmt.Sprint("batch-", i), Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: t0.Add(time.Duration(i) * time.Minute)}
		if err := ts.store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	session := &models.Job{Name: "nb", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: t0.Add(10 * time.Minute),
		SessionType: "terminal", SessionSecret: "k1.s", InteractivePriority: true}
	if err := ts.store.CreateJob(ctx, session); err != nil {
		t.Fatal(err)
	}
	want := append([]int64{session.ID}, ids...) // the session goes first
	var got api.Queues
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := ts.do(t, "alice", http.MethodGet, "/api/v1/queues", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /api/v1/queues: %d %s", rec.Code, rec.Body)
		}
		got = api.Queues{}
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Queues) > 0 && len(got.Queues[0].Jobs) == len(want) && got.Queues[0].Jobs[0].Position > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pass placed the jobs: %+v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	page := ts.do(t, "alice", http.MethodGet, "/queues", "").Body.String()
	at := -1
	for i, qj := range got.Queues[0].Jobs {
		if qj.ID != want[i] || qj.Position != i+1 {
			t.Errorf("row %d: job %d at position %d; want job %d at %d", i, qj.ID, qj.Position, want[i], i+1)
		}
		ahead := "first in "
		switch i {
		case 0:
		case 1:
			ahead = "1 job ahead in "
		default:
			ahead = fmt.Sprintf("%d jobs ahead in ", i)
		}
		if !strings.Contains(qj.Reason, ahead) {
			t.Errorf("job %d at position %d says %q, want %q", qj.ID, qj.Position, qj.Reason, ahead)
		}
		rec := ts.do(t, "alice", http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", qj.ID), "")
		var j api.Job
		if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil || j.Position != qj.Position {
			t.Errorf("job %d's own position %d (%v), the queue's %d", qj.ID, j.Position, err, qj.Position)
		}
		// The page's rows come in the same order.
		next := strings.Index(page, fmt.Sprintf(`data-job="%d"`, qj.ID))
		if next < at {
			t.Errorf("the Queues page shows job %d before the one placed ahead of it", qj.ID)
		}
		at = next
	}
}

// TestQueueRowsShowPriority: a lead sees each job's priority (high,
// normal, low, session) on the Queues page, in GET /api/v1/queues, on
// the team page and in the team topic's frame the page re-renders its
// queue from.
func TestQueueRowsShowPriority(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	ids := map[string]int64{}
	for _, p := range []string{"high", "", "low"} {
		j := &models.Job{Name: "p" + p, Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Now(), Priority: p}
		if err := ts.store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids[job.PriorityName(p)] = j.ID
	}
	ts.newSession(t)
	waitPlaced(t, ts, 4)
	want := map[string]string{"high": "high", "normal": "normal", "low": "low"}

	var q api.Queues
	rec := ts.do(t, "lead", http.MethodGet, "/api/v1/queues", "")
	if err := json.Unmarshal(rec.Body.Bytes(), &q); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/queues: %d %v", rec.Code, err)
	}
	got := map[int64]string{}
	for _, qu := range q.Queues {
		for _, j := range qu.Jobs {
			got[j.ID] = j.Priority
		}
	}
	if len(got) != 4 {
		t.Fatalf("the queues hold %d jobs, want 4: %v", len(got), got)
	}
	for name, id := range ids {
		if got[id] != want[name] {
			t.Errorf("GET /api/v1/queues: job %d has priority %q, want %q", id, got[id], want[name])
		}
	}

	lead, err := ts.store.UserByName(ctx, "lead")
	if err != nil {
		t.Fatal(err)
	}
	frame, err := ts.snapshot(ctx, viewOf(lead), topicTeam+"vision")
	if err != nil {
		t.Fatal(err)
	}
	tt := frame.(api.TeamTopic)
	sessions := 0
	for _, j := range tt.Queue {
		if j.Priority == "" {
			sessions++
		} else if j.Priority != got[j.ID] {
			t.Errorf("the team topic: job %d has priority %q, want %q", j.ID, j.Priority, got[j.ID])
		}
	}
	if len(tt.Queue) != 4 || sessions != 1 {
		t.Errorf("the team topic sends %d jobs, %d without a priority; want 4, the session's", len(tt.Queue), sessions)
	}

	for _, page := range []string{"/queues", "/teams/vision"} {
		body := ts.do(t, "lead", http.MethodGet, page, "").Body.String()
		if !strings.Contains(body, "<th>Priority</th>") {
			t.Errorf("%s has no Priority column", page)
		}
		for _, class := range []string{"high", "normal", "low", "session"} {
			if !priorityCell(body, class) {
				t.Errorf("%s shows no %s job's priority", page, class)
			}
		}
		i := strings.Index(body, fmt.Sprintf(`<tr data-job="%d"`, ids["high"]))
		if i < 0 {
			t.Errorf("%s does not list the high-priority job", page)
			continue
		}
		row := body[i:]
		row = row[:strings.Index(row, "</tr>")]
		if !priorityCell(row, "high") {
			t.Errorf("%s: the high-priority job's row does not say high:\n%s", page, row)
		}
	}
}

// priorityCell says whether html has a Priority cell that reads class.
func priorityCell(html, class string) bool {
	for _, cell := range strings.Split(html, `<td data-label="Priority"`)[1:] {
		if strings.HasPrefix(cell[strings.IndexByte(cell, '>')+1:], class+"</td>") {
			return true
		}
	}
	return false
}

// TestQueuesForecastLineWithoutHistory: before any job has finished the
// forecast has no history to name, and the Queues page says nothing of
// it rather than "from ." (seen on the demo's first minute).
func TestQueuesForecastLineWithoutHistory(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.engine.Wake()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := ts.do(t, "alice", http.MethodGet, "/queues", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /queues: %d", rec.Code)
		}
		body := rec.Body.String()
		if strings.Contains(body, "Latest forecast") {
			if strings.Contains(body, "from .") || strings.Contains(body, "from ,") {
				t.Fatalf("forecast line names an empty history: %q", body[strings.Index(body, "Latest forecast"):][:160])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no forecast line on the Queues page after 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestQueuesJSONAsEchoWrites checks that GET /api/v1/queues' writer
// (queuesJSON, api.Queues.AppendJSON) answers what c.JSON answers: the
// same status, type and bytes, indented for ?pretty, and the same error
// for a value encoding/json cannot write.
func TestQueuesJSONAsEchoWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 1, 2, 3, 4, time.UTC)
	q := api.Queues{Policy: "fifo", Thresholds: []float64{}, AsOf: at, Queues: []api.Queue{{Total: 2, Running: 1, Jobs: []api.QueueJob{
		{ID: 1, Name: "a<b>&c", Team: "vision", User: "alice", GPUs: 1, State: job.Running, ExecutedS: 12.5, AttainedService: 12.5},
		{ID: 2, Team: "nlp", GPUs: 2, State: job.Queued, Position: 1, Priority: "high",
			Forecast: &api.Forecast{State: "forecast", Earliest: &at, Likely: &at, Latest: &at, MadeAt: &at}},
	}}}}
	nan := q
	nan.Thresholds = []float64{math.NaN()}
	e := echo.New()
	for _, tc := range []struct {
		name, target string
		q            api.Queues
	}{
		{"plain", "/api/v1/queues", q},
		{"pretty", "/api/v1/queues?pretty", q},
		{"not a number", "/api/v1/queues", nan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := httptest.NewRecorder(), httptest.NewRecorder()
			gotErr := queuesJSON(e.NewContext(httptest.NewRequest(http.MethodGet, tc.target, nil), got), &tc.q)
			wantErr := e.NewContext(httptest.NewRequest(http.MethodGet, tc.target, nil), want).JSON(http.StatusOK, tc.q)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || got.Code != want.Code ||
				got.Header().Get(echo.HeaderContentType) != want.Header().Get(echo.HeaderContentType) || got.Body.String() != want.Body.String() {
				t.Errorf("queuesJSON: %v, %d %q\n%s\nwant (c.JSON): %v, %d %q\n%s", gotErr, got.Code, got.Header().Get(echo.HeaderContentType), got.Body,
					wantErr, want.Code, want.Header().Get(echo.HeaderContentType), want.Body)
			}
		})
	}
}
