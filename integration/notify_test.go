package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/notify"
	"github.com/gpuportal/gpuportal/notify/notifytest"
)

// webhookAllow is serve --webhook-allow for the tests' webhook receivers,
// which listen on loopback, where webhooks otherwise may not go.
const webhookAllow = "127.0.0.1"

// hook is a webhook receiver that keeps what it is sent and answers
// with status(n) for the n-th request (from 1).
type hook struct {
	srv    *httptest.Server
	status func(n int) int
	secret string

	mu   sync.Mutex
	reqs []hookRequest
}

type hookRequest struct {
	body     string
	verified bool // its signature checks with the secret
	delivery string
}

func newHook(t *testing.T, secret string, status func(n int) int) *hook {
	h := &hook{status: status, secret: secret}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get(notify.TimestampHeader), 10, 64)
		ok := notify.Verify(h.secret, ts, body, r.Header.Get(notify.SignatureHeader))
		h.mu.Lock()
		h.reqs = append(h.reqs, hookRequest{body: string(body), verified: ok, delivery: r.Header.Get(notify.DeliveryHeader)})
		code := h.status(len(h.reqs))
		h.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.reqs...)
}

// notifySettings is the part of GET /api/v1/me/notifications the tests read.
type notifySettings struct {
	Email            string   `json:"email"`
	WebhookURL       string   `json:"webhook_url"`
	WebhookSecretSet bool     `json:"webhook_secret_set"`
	Events           []string `json:"events"`
	EmailEnabled     bool     `json:"email_enabled"`
	Deliveries       []struct {
		ID            int64      `json:"id"`
		JobID         int64      `json:"job_id"`
		Event         string     `json:"event"`
		Channel       string     `json:"channel"`
		State         string     `json:"state"`
		Attempts      int        `json:"attempts"`
		LastError     string     `json:"last_error"`
		NextAttemptAt *time.Time `json:"next_attempt_at"`
	} `json:"deliveries"`
}

// TestNotifications: a user's chosen events reach a real SMTP server and
// a webhook receiver, signed, with links to the job; a receiver that
// fails is retried until it takes the message; bad settings are refused
// naming the field; neither secret reaches the server's log.
func TestNotifications(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	mail := notifytest.StartSMTP(t, notifytest.SMTPOptions{User: "portal", Password: "smtp-pa55word"})
	passFile := filepath.Join(t.TempDir(), "smtp-password")
	if err := os.WriteFile(passFile, []byte("smtp-pa55word\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "hook-s3cret-value"
	refusals := 0
	h := newHook(t, secret, func(n int) int { return http.StatusOK })
	srv := startServer(t, "--data", t.TempDir(), "--max-retries", "0", "--public-url", "https://gpus.example.org/",
		"--smtp-addr", mail.Addr, "--smtp-from", "gpuportal@example.org", "--smtp-user", "portal", "--smtp-password-file", passFile,
		"--notify-retry", "200ms", "--webhook-timeout", "2s", "--webhook-allow", webhookAllow)
	alice := newAPI(t, srv.URL, "alice", "dev")

	// Bad settings: 400 naming the field.
	for _, c := range []struct {
		body string
		want string
	}{
		{`{"webhook_url": "ftp://example.org/x"}`, "webhook_url"},
		{`{"webhook_url": "javascript:alert(1)"}`, "webhook_url"},
		{`{"email": "not-an-address"}`, "email"},
		{`{"events": ["started", "exploded"]}`, "events"},
		{`{"events": ["held"]}`, "held_after_hours"},
		{`{"held_after_hours": -2}`, "held_after_hours"},
		{`{"colour": "red"}`, "colour"},
	} {
		var e struct{ Error string }
		if st := alice.malformed().do(http.MethodPut, "/api/v1/me/notifications", c.body, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, c.want) {
			t.Errorf("PUT %s: %d %q; want 400 naming %s", c.body, st, e.Error, c.want)
		}
	}
	var s notifySettings
	if st := alice.do(http.MethodPut, "/api/v1/me/notifications", map[string]any{
		"email": "alice@example.org", "webhook_url": h.srv.URL + "/hooks/T000/B000/XXXX", "webhook_secret": secret,
		"events": []string{"started", "succeeded", "failed"},
	}, &s); st != http.StatusOK {
		t.Fatalf("PUT settings: %d", st)
	}
	if !s.WebhookSecretSet || !s.EmailEnabled || len(s.Events) != 3 || strings.Contains(fmt.Sprint(s), secret) {
		t.Errorf("settings as saved: %+v", s)
	}

	submit := func(name string, command ...string) int64 {
		var j jobView
		if st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": name, "gpus": 1, "command": command}, &j); st != http.StatusCreated {
			t.Fatalf("submit %s: %d", name, st)
		}
		return j.ID
	}
	good := submit("good", "true")
	bad := submit("bad", "sh", "-c", "exit 3")
	alice.waitState(good, 30*time.Second, "succeeded")
	alice.waitState(bad, 30*time.Second, "failed")

	// Two starts, a success and a failure, by each channel.
	mails := mail.Wait(t, 4, 30*time.Second)
	subjects := map[string]string{}
	for _, m := range mails {
		if m.User != "portal" || m.To[0] != "alice@example.org" || m.From != "gpuportal@example.org" {
			t.Errorf("envelope %+v", m)
		}
		subj := header(m.Data, "Subject")
		subjects[subj] = m.Data
	}
	for _, want := range []string{
		fmt.Sprintf("[gpuportal] job %d (good) started", good), fmt.Sprintf("[gpuportal] job %d (good) succeeded", good),
		fmt.Sprintf("[gpuportal] job %d (bad) started", bad), fmt.Sprintf("[gpuportal] job %d (bad) failed", bad),
	} {
		if _, ok := subjects[want]; !ok {
			t.Errorf("no email %q among %v", want, keys(subjects))
		}
	}
	if body := subjects[fmt.Sprintf("[gpuportal] job %d (bad) failed", bad)]; !strings.Contains(body, fmt.Sprintf("https://gpus.example.org/jobs/%d", bad)) ||
		!strings.Contains(body, "exit code 3") {
		t.Errorf("the failure's email lacks the link or the exit code:\n%s", body)
	}
	eventually(t, 30*time.Second, "4 webhook requests", func() bool { return len(h.requests()) >= 4 })
	for _, r := range h.requests() {
		if !r.verified || r.delivery == "" {
			t.Errorf("webhook request not signed with the secret (delivery %q): %s", r.delivery, r.body)
		}
	}
	texts := ""
	for _, r := range h.requests() {
		texts += r.body + "\n"
	}
	for _, want := range []string{`"text":"Job ` + fmt.Sprint(bad) + ` (bad) of alice failed`, `"event":"succeeded"`,
		`"title_link":"https://gpus.example.org/jobs/` + fmt.Sprint(good), `"attachments":[`} {
		if !strings.Contains(texts, want) {
			t.Errorf("webhook bodies lack %s:\n%s", want, texts)
		}
	}

	// A receiver that fails twice gets the test on the third try.
	h.mu.Lock()
	before := len(h.reqs)
	h.status = func(n int) int {
		if n > before && refusals < 2 {
			refusals++
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	h.mu.Unlock()
	var queued struct{ Queued int }
	if st := alice.do(http.MethodPost, "/api/v1/me/notifications/test", nil, &queued); st != http.StatusAccepted || queued.Queued != 2 {
		t.Fatalf("test: %d %+v", st, queued)
	}
	eventually(t, 30*time.Second, "the test delivered by both channels", func() bool {
		alice.do(http.MethodGet, "/api/v1/me/notifications", nil, &s)
		sent := 0
		for _, d := range s.Deliveries {
			if d.Event == "test" && d.State == "sent" {
				sent++
			}
		}
		return sent == 2
	})
	for _, d := range s.Deliveries {
		if d.Event == "test" && d.Channel == "webhook" && d.Attempts != 3 {
			t.Errorf("the webhook test took %d attempts; want 3 (two refused)", d.Attempts)
		}
	}
	if len(mail.Mails()) != 5 || !strings.Contains(mail.Mails()[4].Data, "test notification") {
		t.Errorf("the test email did not come")
	}

	// /metrics counts the attempts and the backlog.
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`gpuportal_notification_attempts_total{channel="webhook",outcome="failed"} 2`,
		`gpuportal_notification_attempts_total{channel="email",outcome="sent"} 5`, "gpuportal_notifications_pending 0"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The CLI shows and sets the same settings.
	c := newCLI(t, srv.URL)
	tok := []string{"GPUPORTAL_TOKEN=" + alice.token}
	out := c.ok(tok, "notify", "show")
	for _, want := range []string{"alice@example.org", "secret:      set", "started,succeeded,failed", "test", "sent"} {
		if !strings.Contains(out, want) {
			t.Errorf("notify show lacks %q:\n%s", want, out)
		}
	}
	c.fails(tok, []string{"--webhook-url: webhook_url", "scheme"}, "notify", "set", "--webhook-url", "ftp://example.org/x")
	c.fails(tok, []string{"--held-after: held_after_hours"}, "notify", "set", "--events", "held")
	c.fails(tok, []string{"nothing to set"}, "notify", "set")
	out = c.ok(tok, "notify", "set", "--events", "failed,timed_out,held", "--held-after", "6h", "--email", "")
	if !strings.Contains(out, "events:      failed,timed_out,held") || !strings.Contains(out, "held after:  6h0m0s") || !strings.Contains(out, "email:       -") {
		t.Errorf("notify set printed:\n%s", out)
	}

	// Bob sees none of alice's settings.
	bob := newAPI(t, srv.URL, "bob", "dev")
	var theirs notifySettings
	if st := bob.do(http.MethodGet, "/api/v1/me/notifications", nil, &theirs); st != http.StatusOK || theirs.Email != "" || len(theirs.Deliveries) != 0 {
		t.Errorf("bob's settings: %d %+v", st, theirs)
	}
	if out := srv.output(); strings.Contains(out, secret) || strings.Contains(out, "smtp-pa55word") || strings.Contains(out, "/hooks/T000") {
		t.Errorf("a secret reached the server's log")
	}
}

// header is the value of the named header of a raw message.
func header(data, name string) string {
	for _, line := range strings.Split(data, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+": "); ok {
			return v
		}
		if line == "" {
			break
		}
	}
	return ""
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestNotificationReceiverDown: a webhook receiver that does not answer
// holds up nothing but its own messages: with every delivery slot of the
// notifier stuck on it, every job still starts, one after the other; once
// it answers with errors, the user's page shows each failure with its
// next try.
func TestNotificationReceiverDown(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight := 0
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		inFlight++
		mu.Unlock()
		select {
		case <-release:
			http.Error(w, "receiver down for maintenance", http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	}))
	released := sync.OnceFunc(func() { close(release) })
	t.Cleanup(func() { released(); hang.Close() })
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x4x80", "--webhook-timeout", "5m", "--notify-retry", "1m", "--webhook-allow", webhookAllow)
	alice := newAPI(t, srv.URL, "alice", "dev")
	if st := alice.do(http.MethodPut, "/api/v1/me/notifications", map[string]any{
		"webhook_url": hang.URL + "/hook", "events": []string{"started", "succeeded"},
	}, nil); st != http.StatusOK {
		t.Fatalf("PUT settings: %d", st)
	}
	// Jobs that each take the whole machine run one at a time: each
	// start is a scheduling decision. The first four's eight
	// notifications take all of the notifier's eight delivery slots;
	// three more jobs then run while it is wholly stuck.
	submit := func(k int) []int64 {
		var ids []int64
		for i := range k {
			var j jobView
			if st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": fmt.Sprint("whole", i), "gpus": 4,
				"sim": map[string]any{"duration_s": 1}}, &j); st != http.StatusCreated {
				t.Fatalf("submit: %d", st)
			}
			ids = append(ids, j.ID)
		}
		for _, id := range ids {
			alice.waitState(id, 60*time.Second, "succeeded")
		}
		return ids
	}
	stuck := func() int {
		mu.Lock()
		defer mu.Unlock()
		return inFlight
	}
	first := submit(4)
	eventually(t, 30*time.Second, "every delivery slot stuck on the receiver", func() bool { return stuck() == 8 })
	later := submit(3)
	// Measured by the jobs' own histories: every job started, the later
	// ones while no notification could move.
	starts := 0
	for _, id := range append(first, later...) {
		var hist []struct {
			State string `json:"state"`
		}
		alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/history", id), nil, &hist)
		for _, e := range hist {
			if e.State == "running" {
				starts++
			}
		}
	}
	const n = 7
	if starts != n {
		t.Fatalf("%d job starts recorded; want %d", starts, n)
	}
	var s notifySettings
	alice.do(http.MethodGet, "/api/v1/me/notifications", nil, &s)
	if len(s.Deliveries) != 2*n || stuck() != 8 {
		t.Fatalf("%d notifications queued, %d requests at the receiver; want %d and 8 (every slot)", len(s.Deliveries), stuck(), 2*n)
	}
	for _, d := range s.Deliveries {
		if d.State != "pending" || d.Attempts != 0 {
			t.Errorf("while the receiver hangs: %+v", d)
		}
	}

	// The receiver answers 503: each notification shows the failure and
	// its next try, a minute on.
	released()
	eventually(t, 30*time.Second, "failed attempts on the user's page", func() bool {
		alice.do(http.MethodGet, "/api/v1/me/notifications", nil, &s)
		failed := 0
		for _, d := range s.Deliveries {
			if d.State == "pending" && d.Attempts == 1 && d.NextAttemptAt != nil && strings.Contains(d.LastError, "503") {
				failed++
			}
		}
		return failed == 2*n
	})
	if next := s.Deliveries[0].NextAttemptAt; !next.After(time.Now().Add(20 * time.Second)) {
		t.Errorf("next try at %v; want about a minute on", next)
	}
	b := newBrowser(t, srv.URL)
	b.login("alice", "dev")
	st, page := b.get("/notifications")
	if st != http.StatusOK || !strings.Contains(page, "the receiver answered 503 Service Unavailable") ||
		!strings.Contains(page, "Next try") || !strings.Contains(page, "state-pending") {
		t.Errorf("the notifications page (status %d) does not show the failures and their retry:\n%s", st, page)
	}
	if strings.Contains(page, "receiver down for maintenance") {
		t.Errorf("the notifications page shows the body of the receiver's answer")
	}
	// The form refuses what the API refuses.
	form := map[string][]string{"_csrf": {b.csrf("/notifications")}, "webhook_url": {"gopher://x"}, "events": {"started"}}
	if st, _, body := b.post("/notifications", form); st != http.StatusBadRequest || !strings.Contains(body, "webhook_url") {
		t.Errorf("form with a gopher URL: %d", st)
	}
}

// TestHeldNotification: a job that waits longer than its owner's
// threshold is told of, once, by webhook.
func TestHeldNotification(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	h := newHook(t, "", func(int) int { return http.StatusOK })
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x4x80", "--notify-held-check", "1s", "--webhook-allow", webhookAllow)
	alice := newAPI(t, srv.URL, "alice", "dev")
	// 0.001 hours: 3.6 seconds.
	if st := alice.do(http.MethodPut, "/api/v1/me/notifications", map[string]any{
		"webhook_url": h.srv.URL, "events": []string{"held"}, "held_after_hours": 0.001,
	}, nil); st != http.StatusOK {
		t.Fatalf("PUT settings: %d", st)
	}
	var first, second jobView
	alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "hog", "gpus": 4, "sim": map[string]any{"duration_s": 60}}, &first)
	alice.waitState(first.ID, 30*time.Second, "running")
	alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "patient", "gpus": 4, "sim": map[string]any{"duration_s": 1}}, &second)
	eventually(t, 30*time.Second, "the held notification", func() bool { return len(h.requests()) >= 1 })
	body := h.requests()[0].body
	want := fmt.Sprintf(`"text":"Job %d (patient) of alice has waited more than 3 seconds: waiting since `, second.ID)
	if !strings.Contains(body, want) || !strings.Contains(body, `"event":"held"`) {
		t.Errorf("held notification %s; want %s", body, want)
	}
	// Three more held checks (--notify-held-check 1s; each logs that it
	// found no job newly held) tell no one again.
	const checked = "notify: checked waiting jobs: none newly held"
	from := strings.Count(srv.output(), checked)
	eventually(t, 30*time.Second, "three more held checks", func() bool { return strings.Count(srv.output(), checked) >= from+3 })
	if n := len(h.requests()); n != 1 {
		t.Errorf("%d held notifications for one wait", n)
	}
	if j := alice.job(second.ID); j.State != "queued" {
		t.Errorf("the patient job is %s; the test wants it waiting", j.State)
	}
}

// TestWebhookOnlyWhereAllowed: users' webhooks reach loopback (a
// database's port, say) only where serve --webhook-allow names it. A URL
// naming such an address is refused when saved, and the metadata
// service's and the portal's own are refused even with loopback allowed;
// one saved while it was allowed is never dialled once it is not (the
// receiver sees no connection, and the user's delivery log says only
// that it was refused); allowed again by address and port, it is
// delivered.
func TestWebhookOnlyWhereAllowed(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	var conns atomic.Int64
	recv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "secret-banner-of-the-receiver")
	}))
	recv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	recv.Start()
	t.Cleanup(recv.Close)
	hookURL := recv.URL + "/hook"
	data := t.TempDir()
	base := []string{"--data", data, "--sim-gpus", "1x1x80", "--notify-retry", "200ms", "--webhook-timeout", "2s"}
	save := func(a *api, url string) (int, string) {
		t.Helper()
		var e struct{ Error string }
		st := a.do(http.MethodPut, "/api/v1/me/notifications", map[string]any{"webhook_url": url, "events": []string{"failed"}}, &e)
		return st, e.Error
	}

	// Refused when saved: loopback, link-local, the portal itself.
	srv := startServer(t, base...)
	alice := newAPI(t, srv.URL, "alice", "dev")
	for _, c := range []struct{ url, want string }{
		{hookURL, "webhook_url: 127.0.0.1 is a loopback address"},
		{"http://169.254.169.254/latest/meta-data/", "webhook_url: 169.254.169.254 is a link-local address"},
		{"http://localhost:5432/", "webhook_url: localhost (127.0.0.1) is a loopback address"},
		{srv.URL + "/api/v1/jobs", "is this server's own address"},
	} {
		if st, msg := save(alice, c.url); st != http.StatusBadRequest || !strings.Contains(msg, c.want) || !strings.Contains(msg, "--webhook-allow") {
			t.Errorf("save %s: %d %q; want 400 saying %q", c.url, st, msg, c.want)
		}
	}
	srv.stop()

	// Allowed by --webhook-allow: saved. The portal's own address and
	// the metadata service stay refused.
	srv = startServer(t, append(base, "--webhook-allow", "127.0.0.1")...)
	alice = newAPI(t, srv.URL, "alice", "dev")
	for _, c := range []struct{ url, want string }{
		{srv.URL + "/api/v1/jobs", "is this server's own address"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
	} {
		if st, msg := save(alice, c.url); st != http.StatusBadRequest || !strings.Contains(msg, c.want) {
			t.Errorf("save %s with loopback allowed: %d %q; want 400 saying %q", c.url, st, msg, c.want)
		}
	}
	if st, msg := save(alice, hookURL); st != http.StatusOK {
		t.Fatalf("save %s with loopback allowed: %d %s", hookURL, st, msg)
	}
	srv.stop()

	// No longer allowed: the stored URL is never dialled.
	srv = startServer(t, base...)
	alice = newAPI(t, srv.URL, "alice", "dev")
	if st := alice.do(http.MethodPost, "/api/v1/me/notifications/test", nil, nil); st != http.StatusAccepted {
		t.Fatalf("test notification: %d", st)
	}
	var s notifySettings
	eventually(t, 30*time.Second, "the refusal in the delivery log", func() bool {
		alice.do(http.MethodGet, "/api/v1/me/notifications", nil, &s)
		return len(s.Deliveries) == 1 && s.Deliveries[0].Attempts >= 2
	})
	if d := s.Deliveries[0]; d.State != "pending" || d.LastError != "refused: address not allowed" {
		t.Errorf("delivery %+v; want pending, refused: address not allowed", d)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the receiver saw %d connections from a server that does not allow it", n)
	}
	srv.stop()

	// Allowed by address and port: delivered, and the log shows the
	// outcome, never the answer.
	_, port, _ := net.SplitHostPort(recv.Listener.Addr().String())
	srv = startServer(t, append(base, "--webhook-allow", "127.0.0.1:"+port)...)
	alice = newAPI(t, srv.URL, "alice", "dev")
	eventually(t, 60*time.Second, "the delivery", func() bool {
		alice.do(http.MethodGet, "/api/v1/me/notifications", nil, &s)
		return len(s.Deliveries) == 1 && s.Deliveries[0].State == "sent"
	})
	if conns.Load() == 0 {
		t.Errorf("sent without a connection to the receiver")
	}
	if raw := fmt.Sprint(s); strings.Contains(raw, "secret-banner") {
		t.Errorf("the delivery log shows the receiver's answer: %s", raw)
	}
}
