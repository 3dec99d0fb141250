package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// TestResubmitKeepsTheOwner: a job resubmitted by its team's lead (or an
// admin) is its owner's again and runs as its owner, as Slurm's requeue
// keeps a job's owner, never as whoever clicked; the audit log says who
// did it. A teammate may not; an owner who is gone or disabled cannot
// have it run as them. The job page offers the lead "Resubmit as alice",
// a POST that does the same, and its owner the form filled from it.
func TestResubmitKeepsTheOwner(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	if _, err := ts.store.CreateUser(ctx, "carol", "password1", models.RoleResearcher, "vision"); err != nil {
		t.Fatal(err)
	}
	carol, err := ts.store.UserByName(ctx, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if ts.sessions["carol"], err = ts.store.CreateSession(ctx, carol.ID, time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if ts.tokens["carol"], err = ts.store.CreateAPIToken(ctx, carol.ID, "test", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	submit := func() int64 {
		t.Helper()
		rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", `{"name":"train","gpus":1,"command":["python3","train.py"]}`)
		var j api.Job
		if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil || rec.Code != http.StatusCreated {
			t.Fatalf("submit: %d %s", rec.Code, rec.Body)
		}
		return j.ID
	}
	resubmit := func(role string, id int64) (int, api.Job, string) {
		t.Helper()
		rec := ts.do(t, role, http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/resubmit", id), "")
		var j api.Job
		_ = json.Unmarshal(rec.Body.Bytes(), &j)
		return rec.Code, j, rec.Body.String()
	}
	id := submit()

	for _, role := range []string{"alice", "lead", "admin"} {
		code, again, body := resubmit(role, id)
		if code != http.StatusCreated || again.User != "alice" || again.Team != "vision" || strings.Join(again.Command, " ") != "python3 train.py" {
			t.Errorf("%s resubmits alice's job: %d, owner %q of team %q, command %v; want alice's, in vision, the same command (%s)",
				role, code, again.User, again.Team, again.Command, body)
		}
		stored, err := ts.store.Job(ctx, again.ID)
		if err != nil || stored.User != "alice" {
			t.Errorf("%s's resubmission is stored as %q's (%v); it would run as them", role, stored.User, err)
		}
	}
	log, err := ts.store.AuditLog(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]string{}
	for _, e := range log {
		if e.Action == "job.resubmit" {
			by[e.Actor] = e.Target + " " + e.Detail
		}
	}
	if len(by) != 2 || !strings.Contains(by["lead"], fmt.Sprintf("job %d of alice", id)) || !strings.Contains(by["admin"], "alice's") {
		t.Errorf("audit log of resubmissions %v; want the lead's and the admin's, naming alice (not alice's own)", by)
	}

	if code, _, body := resubmit("carol", id); code != http.StatusForbidden || !strings.Contains(body, "only its owner, the lead of vision or an admin") {
		t.Errorf("a teammate resubmits alice's job: %d %s; want 403", code, body)
	}

	// The page: the lead gets "Resubmit as alice", which posts; alice the
	// form; carol neither.
	page := func(role string) string {
		return ts.do(t, role, http.MethodGet, fmt.Sprint("/jobs/", id), "").Body.String()
	}
	if p := page("lead"); !strings.Contains(p, fmt.Sprintf(`action="/jobs/%d/resubmit"`, id)) || !strings.Contains(p, "Resubmit as alice") ||
		strings.Contains(p, fmt.Sprintf("/jobs/new?from=%d", id)) {
		t.Errorf("the lead's job page lacks Resubmit as alice, or offers the form")
	}
	if p := page("alice"); !strings.Contains(p, fmt.Sprintf("/jobs/new?from=%d", id)) || strings.Contains(p, "Resubmit as") {
		t.Errorf("alice's job page does not offer her the form")
	}
	if p := page("carol"); strings.Contains(p, `id="job-resubmit"`) {
		t.Errorf("a teammate's job page offers a resubmit")
	}
	rec := ts.do(t, "lead", http.MethodPost, fmt.Sprintf("/jobs/%d/resubmit", id), "")
	var newID int64
	if _, err := fmt.Sscanf(rec.Header().Get("Location"), "/jobs/%d", &newID); rec.Code != http.StatusSeeOther || err != nil {
		t.Fatalf("the lead's Resubmit as alice: %d, Location %q", rec.Code, rec.Header().Get("Location"))
	}
	if j, err := ts.store.Job(ctx, newID); err != nil || j.User != "alice" || newID == id {
		t.Errorf("the page's resubmission: job %d of %q (%v); want a new job of alice's", newID, j.User, err)
	}
	// Filled from another's job, the form says it would run as the viewer.
	if form := ts.do(t, "lead", http.MethodGet, fmt.Sprint("/jobs/new?from=", id), "").Body.String(); !strings.Contains(form, "runs as you, with what alice wrote") {
		t.Errorf("the form filled from alice's job does not warn the lead that it runs as them")
	}

	// An owner who is disabled cannot have the job run as them again.
	if _, err := ts.store.DisableUser(ctx, "alice", "admin", time.Now()); err != nil {
		t.Fatal(err)
	}
	if code, _, body := resubmit("lead", id); code != http.StatusConflict || !strings.Contains(body, "alice is disabled") {
		t.Errorf("resubmit for a disabled owner: %d %s; want 409", code, body)
	}
}
