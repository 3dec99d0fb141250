package models_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// TestCheckNotificationSettings: bad settings are refused naming the field.
func TestCheckNotificationSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		set  models.NotificationSettings
		want string // "" when valid
	}{
		{"nothing chosen", models.NotificationSettings{}, ""},
		{"email and webhook", models.NotificationSettings{Email: "a@b.org", WebhookURL: "https://hooks.example.org/x?y=1",
			Events: models.Strings{"started", "failed", "timed_out"}}, ""},
		{"held with hours", models.NotificationSettings{Events: models.Strings{"held"}, HeldAfterHours: 6}, ""},
		{"not an email", models.NotificationSettings{Email: "alice"}, "email:"},
		{"email with a name", models.NotificationSettings{Email: "Alice <a@b.org>"}, "email:"},
		{"ftp webhook", models.NotificationSettings{WebhookURL: "ftp://example.org/x"}, "webhook_url: scheme"},
		{"file webhook", models.NotificationSettings{WebhookURL: "file:///etc/passwd"}, "webhook_url:"},
		{"relative webhook", models.NotificationSettings{WebhookURL: "/hook"}, "webhook_url:"},
		{"webhook with a password", models.NotificationSettings{WebhookURL: "https://u:p@example.org/"}, "webhook_url: user information"},
		{"unknown event", models.NotificationSettings{Events: models.Strings{"exploded"}}, `events: unknown event "exploded"`},
		{"event twice", models.NotificationSettings{Events: models.Strings{"failed", "failed"}}, "events:"},
		{"held without hours", models.NotificationSettings{Events: models.Strings{"held"}}, "held_after_hours:"},
		{"negative hours", models.NotificationSettings{HeldAfterHours: -1}, "held_after_hours:"},
		{"too many hours", models.NotificationSettings{HeldAfterHours: 10000}, "held_after_hours:"},
		{"secret on two lines", models.NotificationSettings{WebhookSecret: "a\nb"}, "webhook_secret:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := models.CheckNotificationSettings(&c.set)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || !errors.Is(err, models.ErrInvalid)):
				t.Errorf("got %v; want an ErrInvalid starting %q", err, c.want)
			}
		})
	}
}

// TestNotificationOutbox: a job's events queue the notifications its
// owner chose, by each channel, with the event; delivery outcomes and
// retries are recorded; turning a channel off drops what it had pending.
func TestNotificationOutbox(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		alice, err := s.CreateUser(ctx, "alice", "password1", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateUser(ctx, "bob", "password1", models.RoleResearcher, "vision"); err != nil {
			t.Fatal(err)
		}
		set := &models.NotificationSettings{UserID: alice.ID, Email: "alice@example.org", WebhookURL: "http://127.0.0.1:1/hook",
			Events: models.Strings{models.EventStarted, models.EventFailed}}
		if err := s.SetNotificationSettings(ctx, set, t0); err != nil {
			t.Fatal(err)
		}
		mine := &models.Job{Name: "train", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: t0}
		theirs := &models.Job{Name: "other", Team: "vision", User: "bob", GPUs: 1, SimDuration: 60, SubmittedAt: t0}
		for _, j := range []*models.Job{mine, theirs} {
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		run, err := s.MarkStarted(ctx, mine.ID, []string{"n1:0"}, t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkStarted(ctx, theirs.ID, []string{"n1:1"}, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		code := 3
		if err := s.MarkStopped(ctx, job.RunRef{Job: mine.ID, Run: run}, models.JobFailed, &code, "exit code 3", usage.Service{}, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		ns, err := s.Notifications(ctx, alice.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		// Newest first: failed by both channels, then started by both;
		// nothing for queued, nothing of bob's job.
		var got []string
		for _, n := range ns {
			got = append(got, n.Event+"/"+n.Channel)
			if n.JobID != mine.ID || n.State != models.NotifyPending || n.EventID == 0 {
				t.Errorf("notification %+v", n)
			}
		}
		if strings.Join(got, " ") != "failed/webhook failed/email started/webhook started/email" {
			t.Fatalf("queued %v", got)
		}
		if ns[0].Detail != "exit code 3" || ns[2].Detail != "on n1:0" {
			t.Errorf("details %q, %q", ns[0].Detail, ns[2].Detail)
		}

		// Claimed ones are not claimed again until their lease ends.
		now := t0.Add(2 * time.Minute)
		claimed, err := s.ClaimNotifications(ctx, now, time.Minute, 3)
		if err != nil || len(claimed) != 3 {
			t.Fatalf("claimed %d, %v", len(claimed), err)
		}
		again, err := s.ClaimNotifications(ctx, now, time.Minute, 10)
		if err != nil || len(again) != 1 {
			t.Fatalf("claimed again %d, %v; want the one left", len(again), err)
		}
		if err := s.NotificationSent(ctx, claimed[0].ID, now); err != nil {
			t.Fatal(err)
		}
		retry := now.Add(30 * time.Second)
		if err := s.NotificationFailed(ctx, claimed[1].ID, "connection refused", &retry); err != nil {
			t.Fatal(err)
		}
		if err := s.NotificationFailed(ctx, claimed[2].ID, "550 no such user", nil); err != nil {
			t.Fatal(err)
		}
		byID := map[int64]models.Notification{}
		ns, _ = s.Notifications(ctx, alice.ID, 10)
		for _, n := range ns {
			byID[n.ID] = n
		}
		if n := byID[claimed[0].ID]; n.State != models.NotifySent || n.SentAt == nil || n.Attempts != 1 {
			t.Errorf("sent: %+v", n)
		}
		if n := byID[claimed[1].ID]; n.State != models.NotifyPending || n.Attempts != 1 || n.LastError != "connection refused" || !n.NextAttemptAt.Equal(retry) {
			t.Errorf("to retry: %+v", n)
		}
		if n := byID[claimed[2].ID]; n.State != models.NotifyFailed || n.LastError != "550 no such user" {
			t.Errorf("given up: %+v", n)
		}
		if due, _ := s.ClaimNotifications(ctx, retry, time.Minute, 10); len(due) != 1 || due[0].ID != claimed[1].ID {
			t.Errorf("due at the retry: %+v", due)
		}

		// Turning the webhook off drops its pending notifications.
		set.WebhookURL = ""
		if err := s.SetNotificationSettings(ctx, set, now); err != nil {
			t.Fatal(err)
		}
		ns, _ = s.Notifications(ctx, alice.ID, 10)
		for _, n := range ns {
			if n.Channel == models.ChannelWebhook && n.State == models.NotifyPending {
				t.Errorf("webhook notification %d still pending after the webhook was removed", n.ID)
			}
		}
		if got, _ := s.NotificationSettings(ctx, alice.ID); got.Email != "alice@example.org" || got.WebhookURL != "" || !got.Wants(models.EventFailed) {
			t.Errorf("settings read back %+v", got)
		}

		// The backlog, and pruning what is done with.
		// (the two left were the webhook's, dropped with it).
		if k, err := s.PendingNotifications(ctx); err != nil || k != 0 {
			t.Errorf("pending %d, %v; want none", k, err)
		}
		if k, err := s.PruneNotifications(ctx, t0); err != nil || k != 0 {
			t.Errorf("pruned %d before the first, %v", k, err)
		}
		if k, err := s.PruneNotifications(ctx, now.Add(time.Hour)); err != nil || k != 4 {
			t.Errorf("pruned %d, %v; want the sent, failed and 2 dropped", k, err)
		}

		// A test goes by each channel.
		if k, err := s.EnqueueTestNotification(ctx, alice.ID, now); err != nil || k != 1 {
			t.Errorf("test queued %d, %v", k, err)
		}

		// A deleted user's settings and notifications go with them.
		if _, err := s.DeleteUser(ctx, "alice", "admin", now); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.NotificationSettings(ctx, alice.ID); got.Email != "" || len(got.Events) != 0 {
			t.Errorf("settings outlive their user: %+v", got)
		}
		if ns, _ := s.Notifications(ctx, alice.ID, 10); len(ns) != 0 {
			t.Errorf("%d notifications outlive their user", len(ns))
		}
	})
}

// TestHeldNotifications: a job waiting longer than its owner's threshold
// is told of once per wait; a new wait after a run is told again.
func TestHeldNotifications(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		u, err := s.CreateUser(ctx, "carol", "password1", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		set := &models.NotificationSettings{UserID: u.ID, WebhookURL: "https://example.org/h",
			Events: models.Strings{models.EventHeld}, HeldAfterHours: 2}
		if err := s.SetNotificationSettings(ctx, set, t0); err != nil {
			t.Fatal(err)
		}
		j := &models.Job{Name: "big", Team: "vision", User: "carol", GPUs: 4, SimDuration: 60, SubmittedAt: t0}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		held := func(at time.Time) int {
			t.Helper()
			k, err := s.EnqueueHeldNotifications(ctx, at)
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		if k := held(t0.Add(time.Hour)); k != 0 {
			t.Errorf("an hour in: queued %d", k)
		}
		if k := held(t0.Add(3 * time.Hour)); k != 1 {
			t.Errorf("3 hours in: queued %d, want 1", k)
		}
		if k := held(t0.Add(4 * time.Hour)); k != 0 {
			t.Errorf("4 hours in: queued %d again", k)
		}
		run, err := s.MarkStarted(ctx, j.ID, []string{"n1:0"}, t0.Add(5*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run}, models.JobPreempted, nil, "reclaimed", usage.Service{}, t0.Add(6*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if k := held(t0.Add(7 * time.Hour)); k != 0 {
			t.Errorf("an hour into the second wait: queued %d", k)
		}
		if k := held(t0.Add(9 * time.Hour)); k != 1 {
			t.Errorf("3 hours into the second wait: queued %d, want 1", k)
		}
		ns, _ := s.Notifications(ctx, u.ID, 10)
		if len(ns) != 2 || ns[0].Event != models.EventHeld || !strings.HasPrefix(ns[0].Detail, "waiting since 2026-11-22T18:00:00Z") {
			t.Errorf("held notifications %+v", ns)
		}
	})
}

// TestIdleNotificationsAndKeepAlive: a warned job's owner who chose the
// idle event is told once per run; SetKeepAlive holds only for a running
// job; a team's idle policy round-trips.
func TestIdleNotificationsAndKeepAlive(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		u, err := s.CreateUser(ctx, "carol", "password1", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		j := &models.Job{Name: "nb", Team: "vision", User: "carol", GPUs: 1, SimDuration: 60, SubmittedAt: t0}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if err := s.SetKeepAlive(ctx, j.ID, t0.Add(time.Hour)); !errors.Is(err, models.ErrConflict) {
			t.Errorf("keep a queued job alive: %v, want ErrConflict", err)
		}
		if _, err := s.MarkStarted(ctx, j.ID, []string{"n1:0"}, t0); err != nil {
			t.Fatal(err)
		}
		if k, err := s.EnqueueIdleNotification(ctx, j, t0.Add(time.Hour), t0); err != nil || k != 0 {
			t.Errorf("no idle event chosen: queued %d, %v", k, err)
		}
		set := &models.NotificationSettings{UserID: u.ID, WebhookURL: "https://example.org/h", Events: models.Strings{models.EventIdle}}
		if err := s.SetNotificationSettings(ctx, set, t0); err != nil {
			t.Fatal(err)
		}
		j, err = s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []int{1, 0} {
			if k, err := s.EnqueueIdleNotification(ctx, j, t0.Add(time.Hour), t0); err != nil || k != want {
				t.Errorf("warning %d: queued %d, %v; want %d", i, k, err, want)
			}
		}
		until := t0.Add(2 * time.Hour)
		if err := s.SetKeepAlive(ctx, j.ID, until); err != nil {
			t.Fatal(err)
		}
		if j, err = s.Job(ctx, j.ID); err != nil || j.KeepAliveUntil == nil || !j.KeepAliveUntil.Equal(until) {
			t.Errorf("kept alive until %v (%v), want %v", j.KeepAliveUntil, err, until)
		}
		if err := s.SetTeamIdlePolicy(ctx, "vision", models.IdlePolicy{SpareSessions: true, ReclaimBatch: true, MaxKeepAliveS: 3600}); err != nil {
			t.Fatal(err)
		}
		tm, err := s.Team(ctx, "vision")
		if err != nil || !tm.IdleSpareSessions || !tm.IdleReclaimBatch || tm.MaxKeepAlive() != time.Hour {
			t.Errorf("team policy read back %+v (%v)", tm, err)
		}
		if err := s.SetTeamIdlePolicy(ctx, "nobody", models.IdlePolicy{}); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("unknown team: %v, want ErrNotFound", err)
		}
	})
}

// TestIdleNotificationToLeads: the leads of a job's team who chose the
// idle event are told of its idle GPUs too, once per run each, beside
// its owner; a disabled lead, another team's lead and a lead who did not
// choose the event are not.
func TestIdleNotificationToLeads(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		for _, tm := range []string{"vision", "nlp"} {
			if _, err := s.CreateTeam(ctx, tm, 4); err != nil {
				t.Fatal(err)
			}
		}
		users := map[string]*models.User{}
		for _, u := range []struct {
			name, team string
			role       models.Role
			events     []string
		}{
			{"carol", "vision", models.RoleResearcher, nil},
			{"vlead", "vision", models.RoleLead, []string{models.EventIdle}},
			{"vlead2", "vision", models.RoleLead, []string{models.EventIdle}},
			{"quiet", "vision", models.RoleLead, []string{models.EventFailed}},
			{"gone", "vision", models.RoleLead, []string{models.EventIdle}},
			{"nlead", "nlp", models.RoleLead, []string{models.EventIdle}},
		} {
			nu, err := s.CreateUser(ctx, u.name, "password1", u.role, u.team)
			if err != nil {
				t.Fatal(err)
			}
			users[u.name] = nu
			if u.events != nil {
				set := &models.NotificationSettings{UserID: nu.ID, Email: u.name + "@example.org", WebhookURL: "https://example.org/" + u.name, Events: u.events}
				if err := s.SetNotificationSettings(ctx, set, t0); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := s.DisableUser(ctx, "gone", "admin", t0); err != nil {
			t.Fatal(err)
		}
		j := &models.Job{Name: "nb", Team: "vision", User: "carol", GPUs: 1, SimDuration: 60, SubmittedAt: t0}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkStarted(ctx, j.ID, []string{"n1:0"}, t0); err != nil {
			t.Fatal(err)
		}
		j, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		// carol chose nothing: the two leads who chose it, by both channels.
		for i, want := range []int{4, 0} {
			if k, err := s.EnqueueIdleNotification(ctx, j, t0.Add(time.Hour), t0); err != nil || k != want {
				t.Errorf("warning %d: queued %d, %v; want %d", i, k, err, want)
			}
		}
		for name, want := range map[string]int{"carol": 0, "vlead": 2, "vlead2": 2, "quiet": 0, "gone": 0, "nlead": 0} {
			ns, err := s.Notifications(ctx, users[name].ID, 10)
			if err != nil || len(ns) != want {
				t.Errorf("%s: %d notifications (%v), want %d", name, len(ns), err, want)
			}
			for _, n := range ns {
				if n.Event != models.EventIdle || n.JobID != j.ID || !strings.Contains(n.Detail, "it will be stopped at") {
					t.Errorf("%s: %+v", name, n)
				}
			}
		}
		// The job's next run is warned anew; carol, now choosing it, too.
		set := &models.NotificationSettings{UserID: users["carol"].ID, WebhookURL: "https://example.org/carol", Events: models.Strings{models.EventIdle}}
		if err := s.SetNotificationSettings(ctx, set, t0); err != nil {
			t.Fatal(err)
		}
		j.Run++
		if k, err := s.EnqueueIdleNotification(ctx, j, t0.Add(time.Hour), t0); err != nil || k != 5 {
			t.Errorf("the next run: queued %d, %v; want 5 (carol's webhook, both leads' two channels)", k, err)
		}
	})
}

// TestTeamIdleRule: a team's own idle threshold and time round-trip (0:
// the server's, which a new team has), and the store refuses a rule
// core/idle would not take.
func TestTeamIdleRule(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		tm, err := s.Team(ctx, "vision")
		if err != nil || tm.IdleRule() != (idle.Rule{}) {
			t.Fatalf("a new team's own idle rule is %+v (%v), want none", tm.IdleRule(), err)
		}
		for _, tc := range []struct {
			name string
			p    models.IdlePolicy
			want idle.Rule
		}{
			{"both its own", models.IdlePolicy{BelowPct: 12.5, AfterS: 600}, idle.Rule{After: 10 * time.Minute, BelowPct: 12.5}},
			{"its own threshold", models.IdlePolicy{BelowPct: 100}, idle.Rule{BelowPct: 100}},
			{"back to the server's", models.IdlePolicy{}, idle.Rule{}},
		} {
			if err := s.SetTeamIdlePolicy(ctx, "vision", tc.p); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			tm, err := s.Team(ctx, "vision")
			if err != nil || tm.IdleRule() != tc.want {
				t.Errorf("%s: read back %+v (%v), want %+v", tc.name, tm.IdleRule(), err, tc.want)
			}
		}
		for _, p := range []models.IdlePolicy{{BelowPct: -1}, {BelowPct: 101}, {AfterS: -60}, {AfterS: 2 * 86400}} {
			if err := s.SetTeamIdlePolicy(ctx, "vision", p); err == nil {
				t.Errorf("set %+v: no error", p)
			}
		}
	})
}

// TestSessionReclaimedNotification: a session's preemption (the
// scheduler preempts a session only when a team under its guarantee
// reclaims it, as a last resort) is told to its owner as "reclaimed" by
// every channel they set, though they chose no event; a batch job's
// preemption is told only to those who chose "preempted". A reason
// longer than the column (a reclaim's, with the session's note) is kept
// to its first 512 bytes.
func TestSessionReclaimedNotification(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		alice, err := s.CreateUser(ctx, "alice", "password1", models.RoleResearcher, "vision")
		if err != nil {
			t.Fatal(err)
		}
		set := &models.NotificationSettings{UserID: alice.ID, Email: "alice@example.org", WebhookURL: "http://127.0.0.1:1/hook"}
		if err := s.SetNotificationSettings(ctx, set, t0); err != nil {
			t.Fatal(err)
		}
		shell := &models.Job{Name: "shell", Team: "vision", User: "alice", GPUs: 1, SessionType: "terminal", SubmittedAt: t0}
		batch := &models.Job{Name: "train", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: t0}
		reason := "reclaimed by team nlp under its guarantee, for job 12; a session is reclaimed only as a last resort: " +
			"the batch jobs that borrow could not free enough GPUs; a terminal cannot be checkpointed: its shell was ended" +
			strings.Repeat(" and more", 60)
		for i, j := range []*models.Job{shell, batch} {
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			run, err := s.MarkStarted(ctx, j.ID, []string{fmt.Sprintf("n1:%d", i)}, t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run}, models.JobPreempted, nil, reason, usage.Service{}, t0.Add(time.Minute)); err != nil {
				t.Fatalf("preempt job %d with a reason of %d bytes: %v", j.ID, len(reason), err)
			}
		}
		ns, err := s.Notifications(ctx, alice.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range ns {
			got = append(got, fmt.Sprintf("%d/%s/%s", n.JobID, n.Event, n.Channel))
			if !strings.HasPrefix(n.Detail, "reclaimed by team nlp under its guarantee") {
				t.Errorf("notification %d's detail: %q", n.ID, n.Detail)
			}
		}
		want := fmt.Sprintf("%d/reclaimed/webhook %d/reclaimed/email", shell.ID, shell.ID)
		if strings.Join(got, " ") != want {
			t.Fatalf("queued %v; want %s", got, want)
		}
		j, err := s.Job(ctx, shell.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(j.Reason) > 512 || !strings.HasPrefix(j.Reason, reason[:200]) {
			t.Errorf("stored reason (%d bytes): %q", len(j.Reason), j.Reason)
		}
	})
}
