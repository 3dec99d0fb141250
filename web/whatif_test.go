package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestWhatIf: the page and the API replay the jobs finished in the window
// beside what happened, for admins only; bad fields are 400s naming
// them; the form needs its CSRF token; one replay runs at a time.
func TestWhatIf(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	now := time.Now()
	// Three finished jobs on node n0's two GPUs, an hour ago: the 2-GPU
	// one first, the 1-GPU ones behind it.
	for _, j := range []struct {
		team               string
		gpus               int
		submit, start, end time.Duration // before now
	}{
		{"vision", 2, 3600 * time.Second, 3600 * time.Second, 2600 * time.Second},
		{"nlp", 1, 3590 * time.Second, 2600 * time.Second, 2500 * time.Second},
		{"nlp", 1, 3590 * time.Second, 2600 * time.Second, 2400 * time.Second},
	} {
		m := &models.Job{Name: "w", Team: j.team, User: "alice", GPUs: j.gpus, SubmittedAt: now.Add(-j.submit), SimDuration: 1}
		if err := ts.store.CreateJob(ctx, m); err != nil {
			t.Fatal(err)
		}
		pl := []string{"n0:0", "n0:1"}[:j.gpus]
		run, err := ts.store.MarkStarted(ctx, m.ID, pl, now.Add(-j.start))
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.store.MarkStopped(ctx, job.RunRef{Job: m.ID, Run: run}, models.JobSucceeded, nil, "", usage.Service{}, now.Add(-j.end)); err != nil {
			t.Fatal(err)
		}
	}

	page := ts.do(t, "admin", http.MethodGet, "/admin/whatif", "")
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), `name="_csrf"`) ||
		!strings.Contains(page.Body.String(), `value="fifo" checked`) || strings.Contains(page.Body.String(), `id="whatif"`) {
		t.Fatalf("GET /admin/whatif: %d, want the form with the live policy (fifo) ticked and no report:\n%s", page.Code, page.Body)
	}

	form := url.Values{"days": {"1"}, "policy": {"fifo", "srsf"}, "thresholds": {"200,800"}, "min_runtime_s": {"0"}, "half_life": {"7d"}}
	rec := ts.do(t, "admin", http.MethodPost, "/admin/whatif", form.Encode())
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("POST /admin/whatif: %d\n%s", rec.Code, body)
	}
	for _, s := range []string{`data-policy="actual"`, `data-policy="fifo"`, `data-policy="srsf"`, `id="whatif-cdf"`,
		"3 jobs finished in the last 1 day", "1 node of 2 GPUs", "nlp avg JCT", "vision avg JCT"} {
		if !strings.Contains(body, s) {
			t.Errorf("the report lacks %q:\n%s", s, body)
		}
	}

	var rep struct {
		Jobs int `json:"jobs"`
		GPUs int `json:"gpus"`
		Rows []struct {
			Name    string  `json:"name"`
			AvgJCTS float64 `json:"avg_jct_s"`
		} `json:"rows"`
	}
	api := ts.do(t, "admin", http.MethodGet, "/api/v1/whatif?days=1&policy=fifo,srsf", "")
	if api.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/whatif: %d %s", api.Code, api.Body)
	}
	if err := json.Unmarshal(api.Body.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Jobs != 3 || rep.GPUs != 2 || len(rep.Rows) != 3 || rep.Rows[0].Name != "actual" || rep.Rows[2].Name != "srsf" {
		t.Fatalf("report = %+v", rep)
	}
	// Actual JCTs 1,000, 1,090 and 1,190 s.
	if got := rep.Rows[0].AvgJCTS; got < 1093.3 || got > 1093.4 {
		t.Errorf("actual avg JCT = %v, want 1093.33", got)
	}
	// The server ran fifo; replayed under fifo, the jobs do the same.
	if got := rep.Rows[1].AvgJCTS; got < 1093.3 || got > 1093.4 {
		t.Errorf("fifo replay avg JCT = %v, want what happened, 1093.33", got)
	}

	for _, tc := range []struct {
		name, form, says string
	}{
		{"days is a whole number", "days=1.5&policy=fifo", "days: must be a whole number of days from 1 to 90"},
		{"days at most 90", "days=91&policy=fifo", "days: must be"},
		{"a known policy", "days=1&policy=magic", "policy: unknown policy"},
		{"a policy at least", "days=1", "policy: tick at least one policy"},
		{"thresholds increase", "days=1&policy=fifo&thresholds=800,200", "thresholds: limits must increase"},
		{"min runtime is seconds", "days=1&policy=fifo&min_runtime_s=-1", "min_runtime_s: must be"},
		{"half-life is a duration", "days=1&policy=fifo&half_life=soon", "half_life: must be"},
		{"sharing none or salus", "days=1&policy=fifo&sharing=mps", "sharing: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, "admin", http.MethodPost, "/admin/whatif", tc.form)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.says) {
				t.Errorf("status %d, want 400 saying %q:\n%.500s", rec.Code, tc.says, rec.Body)
			}
		})
	}
	if rec := ts.do(t, "admin", http.MethodGet, "/api/v1/whatif?days=0", ""); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "days: ") {
		t.Errorf("API days=0: %d %s, want 400 naming days", rec.Code, rec.Body)
	}

	for _, who := range []string{"alice", "lead"} {
		if rec := ts.do(t, who, http.MethodPost, "/admin/whatif", form.Encode()); rec.Code != http.StatusForbidden {
			t.Errorf("POST /admin/whatif as %s: %d, want 403", who, rec.Code)
		}
		if rec := ts.do(t, who, http.MethodGet, "/api/v1/whatif?days=1", ""); rec.Code != http.StatusForbidden {
			t.Errorf("GET /api/v1/whatif as %s: %d, want 403", who, rec.Code)
		}
	}

	// The form without its session's CSRF token is refused.
	req := httptest.NewRequest(http.MethodPost, "/admin/whatif", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: ts.sessions["admin"]})
	w := httptest.NewRecorder()
	ts.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusForbidden {
		t.Errorf("POST /admin/whatif without a CSRF token: %d, want 403", w.Code)
	}

	// One replay at a time: while one runs, another is told to wait.
	ts.whatIfSlot <- struct{}{}
	rec = ts.do(t, "admin", http.MethodPost, "/admin/whatif", form.Encode())
	<-ts.whatIfSlot
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "another what-if replay is running") {
		t.Errorf("a second replay at once: %d, want 503:\n%.300s", rec.Code, rec.Body)
	}
}
