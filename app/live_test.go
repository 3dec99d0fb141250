package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// session stores a Jupyter session of alice's in vision and returns it.
func (f *fixture) session(t *testing.T) *models.Job {
	t.Helper()
	salt, err := models.NewSessionSalt()
	if err != nil {
		t.Fatal(err)
	}
	j := &models.Job{Name: "nb", Team: "vision", User: "alice", GPUs: 1, SessionType: "jupyter", SessionSecret: salt, SubmittedAt: time.Now()}
	if err := f.store.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestSessionOpen: only the owner and admins open a session; a wrong
// secret, a batch job and a job that does not exist get one answer; an
// admin's opening of another's session is audited once per
// SessionAuditEvery.
func TestSessionOpen(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j := f.session(t)
	batch := f.job(t, false)
	secret := strings.Split(strings.Trim(f.store.SessionPrefix(j), "/"), "/")[2]
	o := f.app.SessionOpener()
	tests := []struct {
		who    string
		id     int64
		secret string
		want   string
	}{
		{"alice", j.ID, secret, "ok"},
		{"admin", j.ID, secret, "ok"},
		{"carol", j.ID, secret, "forbidden"},
		{"visionlead", j.ID, secret, "forbidden"},
		{"bob", j.ID, secret, "forbidden"},
		{"alice", j.ID, "wrong", "not found"},
		{"alice", batch, secret, "not found"},
		{"alice", 999, secret, "not found"},
	}
	for _, tc := range tests {
		s, err := o.Open(ctx, Actor{User: f.users[tc.who]}, tc.id, tc.secret)
		if got := outcome(err); got != tc.want {
			t.Errorf("%s opens job %d with secret %q: %s, want %s", tc.who, tc.id, tc.secret, got, tc.want)
		}
		if err == nil && (s.Token == "" || s.Prefix != f.store.SessionPrefix(j)) {
			t.Errorf("%s opens job %d: prefix %q, token set %v", tc.who, tc.id, s.Prefix, s.Token != "")
		}
	}
	if _, err := o.Open(ctx, Actor{User: f.users["admin"]}, j.ID, secret); err != nil {
		t.Fatal(err)
	}
	log, err := f.store.AuditLog(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	opened := 0
	for _, e := range log {
		if e.Action == "session.open" {
			opened++
		}
	}
	if opened != 1 {
		t.Errorf("an admin opened alice's session twice: %d audit entries, want 1", opened)
	}
	for who, want := range map[string]bool{"alice": true, "admin": true, "carol": false, "visionlead": false} {
		if got := f.app.SessionURL(f.users[who], jobView(j)) != ""; got != want {
			t.Errorf("%s gets the session's URL: %v, want %v", who, got, want)
		}
	}
}

// TestSessionEnded: a proxied request ends when its user may no longer
// open the session, or its run ended.
func TestSessionEnded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j := f.session(t)
	if _, err := f.store.MarkStarted(ctx, j.ID, []string{"gpu1:0"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	run, err := f.store.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		who  string
		id   int64
		run  int64
		want string
	}{
		{"alice", j.ID, run.Run, ""},
		{"admin", j.ID, run.Run, ""},
		{"carol", j.ID, run.Run, "carol may no longer open it"},
		{"alice", j.ID, run.Run + 1, "its run ended"},
		{"alice", 999, 1, "alice may no longer open it"},
	}
	for _, tc := range tests {
		got, err := f.app.SessionEnded(ctx, f.users[tc.who], tc.id, tc.run, map[int64]*Job{})
		if err != nil || got != tc.want {
			t.Errorf("%s on job %d run %d: %q, %v; want %q", tc.who, tc.id, tc.run, got, err, tc.want)
		}
	}
}

// TestLiveTopicsAuthorization: who may follow alice's job and the
// teams' topics; a job or team one may not see is one that does not
// exist.
func TestLiveTopicsAuthorization(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.job(t, false)
	teams := map[int64]string{}
	for who, want := range map[string]string{"alice": "ok", "carol": "ok", "visionlead": "ok", "admin": "ok", "bob": "not found", "nlplead": "not found"} {
		if got := outcome(f.app.MaySeeJob(ctx, f.users[who], id, teams)); got != want {
			t.Errorf("%s may see job %d: %s, want %s", who, id, got, want)
		}
		_, err := f.app.FollowedJob(ctx, Actor{User: f.users[who]}, id)
		if got := outcome(err); got != want {
			t.Errorf("%s follows job %d: %s, want %s", who, id, got, want)
		}
		if got := outcome(MaySeeTeam(f.users[who], "vision")); got != want {
			t.Errorf("%s may see team vision: %s, want %s", who, got, want)
		}
		js, err := f.app.TeamJobs(ctx, Actor{User: f.users[who]}, "vision", []int64{id, 999})
		if got := outcome(err); got != want || (err == nil && len(js) != 1) {
			t.Errorf("%s reads vision's queued jobs: %s, %d jobs; want %s", who, got, len(js), want)
		}
	}
	if got := outcome(f.app.MaySeeJob(ctx, f.users["admin"], 999, teams)); got != "not found" {
		t.Errorf("a job that does not exist: %s, want not found", got)
	}
	js, err := f.app.TeamJobs(ctx, Actor{User: f.users["admin"]}, "nlp", []int64{id})
	if err != nil || len(js) != 0 {
		t.Errorf("nlp's queued jobs hold vision's: %v, %v", js, err)
	}
}

// TestTemplatesAreTheirOwners: a user sees and deletes their own
// templates only; a name is required, once per user.
func TestTemplatesAreTheirOwners(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	alice, bob := Actor{User: f.users["alice"]}, Actor{User: f.users["bob"]}
	req := api.SubmitRequest{Name: "train", Team: "vision", GPUs: 1, Sim: &api.SimSpec{DurationS: 60}}
	tpl, err := f.app.SaveTemplate(ctx, alice, "mine", req)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"again", func() error { _, err := f.app.SaveTemplate(ctx, alice, "mine", req); return err }(), "invalid"},
		{"no name", func() error { _, err := f.app.SaveTemplate(ctx, alice, "", req); return err }(), "invalid"},
		{"bob reads it", func() error { _, err := f.app.Template(ctx, bob, tpl.ID); return err }(), "not found"},
		{"bob deletes it", f.app.DeleteTemplate(ctx, bob, tpl.ID), "not found"},
		{"alice reads it", func() error { _, err := f.app.Template(ctx, alice, tpl.ID); return err }(), "ok"},
	} {
		if got := outcome(tc.err); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if ts, err := f.app.Templates(ctx, bob); err != nil || len(ts) != 0 {
		t.Errorf("bob's templates: %v, %v; want none", ts, err)
	}
	if err := f.app.DeleteTemplate(ctx, alice, tpl.ID); err != nil {
		t.Fatal(err)
	}
	if ts, err := f.app.Templates(ctx, alice); err != nil || len(ts) != 0 {
		t.Errorf("alice's templates after deleting hers: %v, %v; want none", ts, err)
	}
}
