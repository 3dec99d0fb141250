package notify

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/notify/notifytest"
	"github.com/gpuportal/gpuportal/outbound"
)

func TestBackoff(t *testing.T) {
	base, max := 30*time.Second, time.Hour
	for _, c := range []struct {
		name    string
		attempt int
		want    time.Duration
	}{
		{"the first failure waits the base", 1, 30 * time.Second},
		{"a zero attempt counts as the first", 0, 30 * time.Second},
		{"the second waits twice", 2, time.Minute},
		{"then it doubles", 5, 8 * time.Minute},
		{"up to the cap", 8, time.Hour},
		{"and stays there", 11, time.Hour},
		{"even where doubling would overflow", 200, time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Backoff(c.attempt, base, max); got != c.want {
				t.Errorf("Backoff(%d) = %v; want %v", c.attempt, got, c.want)
			}
		})
	}
	// All attempts together span hours, not days.
	var total time.Duration
	for a := 1; a < models.MaxNotifyAttempts; a++ {
		total += Backoff(a, base, max)
	}
	if total < 3*time.Hour || total > 12*time.Hour {
		t.Errorf("retries span %v", total)
	}
}

var at = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func exit(c int) *int { return &c }

func TestMessages(t *testing.T) {
	j := &models.Job{ID: 42, Name: "resnet", User: "alice", Team: "vision", GPUs: 2, State: models.JobFailed, ExitCode: exit(3)}
	for _, c := range []struct {
		name, event, detail string
		job                 *models.Job
		wantText, wantSubj  string
	}{
		{"started names the place", models.EventStarted, "on n1:0, n1:1", j,
			"Job 42 (resnet) of alice started: on n1:0, n1:1. https://gpus.example.org/jobs/42", "[gpuportal] job 42 (resnet) started"},
		{"failed tells the exit code", models.EventFailed, "the process failed", j,
			"Job 42 (resnet) of alice failed: the process failed (exit code 3). https://gpus.example.org/jobs/42", "[gpuportal] job 42 (resnet) failed"},
		{"timed out", models.EventTimedOut, "time limit 1h reached", j,
			"Job 42 (resnet) of alice timed out: time limit 1h reached (exit code 3). https://gpus.example.org/jobs/42", "[gpuportal] job 42 (resnet) timed out"},
		{"preempted", models.EventPreempted, "reclaimed by team nlp", j,
			"Job 42 (resnet) of alice was preempted: reclaimed by team nlp. https://gpus.example.org/jobs/42", "[gpuportal] job 42 (resnet) was preempted"},
		{"a reclaimed session says why", models.EventReclaimed, "reclaimed by team nlp under its guarantee; a terminal cannot be checkpointed", j,
			"Job 42 (resnet) of alice lost its borrowed GPUs: reclaimed by team nlp under its guarantee; a terminal cannot be checkpointed. https://gpus.example.org/jobs/42",
			"[gpuportal] job 42 (resnet) lost its borrowed GPUs"},
		{"held says how long", models.EventHeld, "waiting since 2026-11-24T04:00:00Z", j,
			"Job 42 (resnet) of alice has waited more than 6 hours: waiting since 2026-11-24T04:00:00Z. https://gpus.example.org/jobs/42", "[gpuportal] job 42 (resnet) has waited more than 6 hours"},
		{"a test links the settings", models.EventTest, "", nil,
			"This is a test notification from gpuportal for alice: notifications reach you here. Settings: https://gpus.example.org/notifications", "[gpuportal] test notification"},
		{"a job that is gone", models.EventCancelled, "by alice", nil,
			"Job 42 was cancelled: by alice (the job is gone). https://gpus.example.org/", "[gpuportal] job 42 cancelled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := &models.Notification{ID: 7, JobID: 42, Event: c.event, Detail: c.detail, At: at}
			m := NewMessage(n, c.job, "alice", "https://gpus.example.org/", 6)
			if m.Text != c.wantText {
				t.Errorf("text\n got %q\nwant %q", m.Text, c.wantText)
			}
			if m.Subject != c.wantSubj {
				t.Errorf("subject %q; want %q", m.Subject, c.wantSubj)
			}
		})
	}
}

// TestPayload: the webhook body is what Slack and Mattermost incoming
// webhooks read (text, attachments with fields) and carries the job for
// programs.
func TestPayload(t *testing.T) {
	j := &models.Job{ID: 42, Name: "resnet", User: "alice", Team: "vision", GPUs: 2, State: models.JobSucceeded, ExitCode: exit(0)}
	m := NewMessage(&models.Notification{JobID: 42, Event: models.EventSucceeded, At: at}, j, "alice", "http://portal", 0)
	b, err := json.Marshal(m.Payload())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Text        string `json:"text"`
		Attachments []struct {
			Fallback, Color, Title, TitleLink string
			Fields                            []struct {
				Title, Value string
				Short        bool
			}
		} `json:"attachments"`
		Event string    `json:"event"`
		At    time.Time `json:"at"`
		Job   struct {
			ID       int64  `json:"id"`
			State    string `json:"state"`
			ExitCode *int   `json:"exit_code"`
			URL      string `json:"url"`
		} `json:"job"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Text != "Job 42 (resnet) of alice succeeded (exit code 0). http://portal/jobs/42" {
		t.Errorf("text %q", got.Text)
	}
	if len(got.Attachments) != 1 || got.Attachments[0].Title != "Job 42: resnet" || got.Attachments[0].Color == "" ||
		!strings.Contains(string(b), `"title_link":"http://portal/jobs/42"`) {
		t.Errorf("attachments %+v in %s", got.Attachments, b)
	}
	fields := map[string]string{}
	for _, f := range got.Attachments[0].Fields {
		fields[f.Title] = f.Value
	}
	if fields["Event"] != "succeeded" || fields["Owner"] != "alice" || fields["GPUs"] != "2" || fields["Exit code"] != "0" {
		t.Errorf("fields %v", fields)
	}
	if got.Event != "succeeded" || !got.At.Equal(at) || got.Job.ID != 42 || got.Job.ExitCode == nil || got.Job.URL != "http://portal/jobs/42" {
		t.Errorf("structured fields %+v", got)
	}
}

func TestSignVerify(t *testing.T) {
	body := []byte(`{"text":"hi"}`)
	sig := Sign("s3cret", 1700000000, body)
	// Known answer: printf '1700000000.{"text":"hi"}' | openssl dgst -sha256 -hmac s3cret
	if !strings.HasPrefix(sig, "sha256=") || len(sig) != len("sha256=")+64 {
		t.Fatalf("signature %q", sig)
	}
	for _, c := range []struct {
		name   string
		secret string
		ts     int64
		body   []byte
		ok     bool
	}{
		{"the same", "s3cret", 1700000000, body, true},
		{"another secret", "other", 1700000000, body, false},
		{"another time", "s3cret", 1700000001, body, false},
		{"another body", "s3cret", 1700000000, []byte(`{"text":"ho"}`), false},
	} {
		if got := Verify(c.secret, c.ts, c.body, sig); got != c.ok {
			t.Errorf("%s: Verify = %v", c.name, got)
		}
	}
}

// TestWebhookPost: the request is signed, and a failure tells the user
// the outcome alone: the status, never the receiver's answer, and never
// the URL, which may hold a token.
func TestWebhookPost(t *testing.T) {
	var mu sync.Mutex
	var gotSig, gotTS, gotDelivery string
	var gotBody []byte
	var paths []string
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.URL.Path)
		gotSig, gotTS, gotDelivery = r.Header.Get(SignatureHeader), r.Header.Get(TimestampHeader), r.Header.Get(DeliveryHeader)
		gotBody = body
	}))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "SSH-2.0-OpenSSH_9.2 no such channel")
	}))
	defer bad.Close()
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ok.URL+"/elsewhere", http.StatusFound)
	}))
	defer moved.Close()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer hang.Close()
	defer close(release) // before Close, which waits for the handler

	// The test's receivers listen on loopback: allowed by name here, as
	// serve --webhook-allow 127.0.0.1 would.
	allow, err := outbound.Parse("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	w := NewWebhook(300*time.Millisecond, allow)
	p := Payload{Text: "hello", Event: "test"}
	ctx := context.Background()
	if err := w.Post(ctx, ok.URL+"/hook", "s3cret", 9, at, p); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	ts, _ := strconv.ParseInt(gotTS, 10, 64)
	if !Verify("s3cret", ts, gotBody, gotSig) || gotDelivery != "9" {
		t.Errorf("signature %q of %q at %q does not verify (delivery %q)", gotSig, gotBody, gotTS, gotDelivery)
	}
	gotSig = "x"
	mu.Unlock()
	err = w.Post(ctx, ok.URL+"/hook", "", 9, at, p)
	mu.Lock()
	if err != nil || gotSig != "" {
		t.Errorf("without a secret: %v, signature %q", err, gotSig)
	}
	mu.Unlock()
	for _, c := range []struct {
		name string
		w    *Webhook
		url  string
		want string
	}{
		{"an error status", w, bad.URL + "/services/TOKEN", "the receiver answered 404 Not Found"},
		{"a redirect is not followed", w, moved.URL + "/services/TOKEN", "the receiver answered 302 Found"},
		{"no answer", w, hang.URL + "/services/TOKEN", "no answer within the time limit (timeout)"},
		{"nobody listens", w, "http://127.0.0.1:1/services/TOKEN", "connection failed"},
		{"a refused address", NewWebhook(300*time.Millisecond, nil), ok.URL + "/services/TOKEN", "refused: address not allowed"},
		{"a refused address where nobody listens", NewWebhook(300*time.Millisecond, nil), "http://127.0.0.1:1/services/TOKEN", "refused: address not allowed"},
	} {
		err := c.w.Post(ctx, c.url, "s3cret", 9, at, p)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v; want %q, no more", c.name, err, c.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(paths, "/elsewhere") {
		t.Errorf("the redirect was followed: %v", paths)
	}
}

// TestMailer sends through a real SMTP server: STARTTLS when offered,
// authentication, and a message whose headers cannot be injected into.
func TestMailer(t *testing.T) {
	cert, pool := selfSigned(t)
	srv := notifytest.StartSMTP(t, notifytest.SMTPOptions{User: "portal", Password: "pw",
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	m := &Mailer{Addr: srv.Addr, From: "gpuportal@example.org", Username: "portal", Password: "pw",
		TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}, Timeout: 10 * time.Second}
	if err := CheckMailer(m); err != nil {
		t.Fatal(err)
	}
	if err := m.Send(context.Background(), "alice@example.org", "job 1 failed\r\nBcc: eve@example.org", "line one\n.\nümlaut"); err != nil {
		t.Fatal(err)
	}
	got := srv.Wait(t, 1, 10*time.Second)[0]
	if !got.TLS || got.User != "portal" || got.From != "gpuportal@example.org" || len(got.To) != 1 || got.To[0] != "alice@example.org" {
		t.Errorf("envelope %+v", got)
	}
	if strings.Contains(got.Data, "\nBcc:") {
		t.Errorf("a header was injected:\n%s", got.Data)
	}
	for _, want := range []string{"Subject: job 1 failed  Bcc: eve@example.org", "Content-Type: text/plain; charset=utf-8", "line one\r\n.\r\n=C3=BCmlaut"} {
		if !strings.Contains(got.Data, want) {
			t.Errorf("message lacks %q:\n%s", want, got.Data)
		}
	}

	// A wrong password is an error that says AUTH, not a hang.
	m.Password = "wrong"
	if err := m.Send(context.Background(), "alice@example.org", "s", "b"); err == nil || !strings.Contains(err.Error(), "AUTH") {
		t.Errorf("wrong password: %v", err)
	}
	for _, c := range []struct {
		name string
		m    Mailer
		want string
	}{
		{"no port", Mailer{Addr: "mail.example.org", From: "a@b.org"}, "--smtp-addr"},
		{"no sender", Mailer{Addr: "mail.example.org:587"}, "--smtp-from"},
	} {
		if err := CheckMailer(&c.m); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
