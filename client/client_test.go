package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
)

// The server's side of these exchanges is written out here, route by
// route, to reach what the real server seldom does (a 503 on submission,
// a requeued job's output starting anew); integration/client_test.go
// runs the client against the real binary.

func TestErrorNamesField(t *testing.T) {
	tests := []struct {
		status    int
		body      string
		wantMsg   string
		wantField string
	}{
		{400, `{"error":"gpus: must be at least 1"}`, "gpus: must be at least 1", "gpus"},
		{400, `{"error":"cpu_profile.cpu_curve: point 2: speed 0.4 falls"}`, "cpu_profile.cpu_curve: point 2: speed 0.4 falls", "cpu_profile.cpu_curve"},
		{400, `{"error":"env[2]: not NAME=VALUE"}`, "env[2]: not NAME=VALUE", "env[2]"},
		{409, `{"error":"session.port: taken"}`, "session.port: taken", "session.port"},
		{400, `{"error":"command must be given"}`, "command must be given", ""},
		{404, `{"error":"no job 9"}`, "no job 9", ""},
		{500, `{"error":"store: closed"}`, "store: closed", ""},
		{502, `<html><body>Bad Gateway</body></html>`, "502 Bad Gateway: <html><body>Bad Gateway</body></html>", ""},
		{503, ``, "503 Service Unavailable", ""},
	}
	for _, tc := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		cl, err := New(srv.URL, "tok", WithRetryPauses())
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Job(context.Background(), 9)
		srv.Close()
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%d %s: err %v, want an *Error", tc.status, tc.body, err)
			continue
		}
		if ce.Status != tc.status || ce.Message != tc.wantMsg || ce.Field != tc.wantField || FieldOf(err) != tc.wantField || ce.Path != "/api/v1/jobs/9" {
			t.Errorf("%d %s: got %+v, want message %q, field %q", tc.status, tc.body, ce, tc.wantMsg, tc.wantField)
		}
	}
}

func TestNewRefusesBadServer(t *testing.T) {
	for _, s := range []string{"", "gpus.example.com", "ftp://gpus", "https://gpus/?x=1", "https://gpus/#top"} {
		if _, err := New(s, "tok"); err == nil {
			t.Errorf("New(%q) accepted it", s)
		}
	}
	cl, err := New(" https://gpus.example.com/portal/ ", "tok")
	if err != nil || cl.Server().String() != "https://gpus.example.com/portal" {
		t.Errorf("New: %v, %v; want https://gpus.example.com/portal", cl, err)
	}
}

// TestSubmitRetries checks that a submission the server cannot serve is
// sent again under the same key, that a refusal is not, and that the
// pauses end.
func TestSubmitRetries(t *testing.T) {
	tests := []struct {
		name     string
		statuses []int
		pauses   int
		want     int // requests
		wantErr  int // status of the error; 0: success
	}{
		{"served at once", []int{201}, 3, 1, 0},
		{"after two 503s", []int{503, 502, 201}, 3, 3, 0},
		{"a 504 and a replay", []int{504, 200}, 3, 2, 0},
		{"a refusal is final", []int{400}, 3, 1, 400},
		{"a conflict is final", []int{503, 409}, 3, 2, 409},
		{"the pauses end", []int{503, 503, 503, 503}, 2, 3, 503},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				status := tc.statuses[min(len(keys), len(tc.statuses))-1]
				mu.Unlock()
				w.WriteHeader(status)
				if status < 300 {
					_ = json.NewEncoder(w).Encode(api.Job{ID: 7, State: job.Queued})
					return
				}
				_ = json.NewEncoder(w).Encode(api.Error{Error: "gpus: refused"})
			}))
			defer srv.Close()
			pauses := make([]time.Duration, tc.pauses)
			for i := range pauses {
				pauses[i] = time.Millisecond
			}
			cl, err := New(srv.URL, "tok", WithRetryPauses(pauses...))
			if err != nil {
				t.Fatal(err)
			}
			j, err := cl.Submit(context.Background(), api.SubmitRequest{Name: "x", GPUs: 1})
			if StatusOf(err) != tc.wantErr || (tc.wantErr == 0 && (err != nil || j.ID != 7)) {
				t.Errorf("Submit = %+v, %v; want status %d", j, err, tc.wantErr)
			}
			if len(keys) != tc.want {
				t.Errorf("%d requests, want %d", len(keys), tc.want)
			}
			for _, k := range keys {
				if k == "" || k != keys[0] {
					t.Errorf("keys %q: want one key, the same on every attempt", keys)
					break
				}
			}
		})
	}
}

func TestSubmitStopsWithContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	cl, err := New(srv.URL, "tok", WithRetryPauses(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := cl.Submit(ctx, api.SubmitRequest{Name: "x"}); done <- err }()
	cancel()
	if err := <-done; StatusOf(err) != http.StatusServiceUnavailable && !errors.Is(err, context.Canceled) {
		t.Errorf("Submit = %v, want the 503 or the cancellation", err)
	}
}

// TestAllJobsFollowsCursor checks that AllJobs follows X-Next-Cursor to
// the last page with the filters on every request.
func TestAllJobsFollowsCursor(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		pages := map[string]struct {
			ids  []int64
			next string
		}{"": {[]int64{9, 8}, "c1"}, "c1": {[]int64{7}, "c2"}, "c2": {nil, ""}}
		p := pages[r.URL.Query().Get("cursor")]
		js := []api.Job{}
		for _, id := range p.ids {
			js = append(js, api.Job{ID: id})
		}
		if p.next != "" {
			w.Header().Set("X-Next-Cursor", p.next)
		}
		_ = json.NewEncoder(w).Encode(js)
	}))
	defer srv.Close()
	cl, err := New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	q := JobQuery{Scope: "team", States: []string{"failed", "succeeded"}, User: "alice", Limit: 2}
	jobs, err := cl.AllJobs(context.Background(), q)
	if err != nil || len(jobs) != 3 || jobs[0].ID != 9 || jobs[2].ID != 7 {
		t.Fatalf("AllJobs = %v, %v; want 9, 8, 7", jobs, err)
	}
	if len(queries) != 3 {
		t.Fatalf("%d requests, want 3", len(queries))
	}
	for i, raw := range queries {
		want := "limit=2&scope=team&state=failed%2Csucceeded&user=alice"
		if i > 0 {
			want = "cursor=c" + strconv.Itoa(i) + "&" + want
		}
		if raw != want {
			t.Errorf("request %d: query %q, want %q", i, raw, want)
		}
	}
	p, err := cl.Jobs(context.Background(), q)
	if err != nil || len(p.Jobs) != 2 || p.Next != "c1" {
		t.Errorf("Jobs = %+v, %v; want the first page and its cursor", p, err)
	}
}

// logServer answers the logs route as the server does (X-Log-Size,
// ?offset=, ?tail_bytes=) from what out says the output is at each
// request of the job's state, which ends after the last.
type logServer struct {
	mu    sync.Mutex
	outs  []string // the output at each poll of the job
	poll  int
	final job.State
}

func (s *logServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !strings.HasSuffix(r.URL.Path, "/logs") {
		s.poll++
		j := api.Job{ID: 3, State: job.Running}
		if s.poll >= len(s.outs) {
			j.State = s.final
		}
		_ = json.NewEncoder(w).Encode(j)
		return
	}
	out := s.outs[min(s.poll, len(s.outs))-1]
	if out == "-" {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "job 3 has no output yet"})
		return
	}
	w.Header().Set("X-Log-Size", strconv.Itoa(len(out)))
	if v := r.URL.Query().Get("offset"); v != "" {
		off, _ := strconv.Atoi(v)
		_, _ = w.Write([]byte(out[min(off, len(out)):]))
		return
	}
	n, _ := strconv.Atoi(r.URL.Query().Get("tail_bytes"))
	_, _ = w.Write([]byte(out[max(0, len(out)-n):]))
}

func TestFollowLogs(t *testing.T) {
	tests := []struct {
		name      string
		outs      []string
		tail      int64
		want      string
		restarted int
	}{
		{name: "grows until the job ends", outs: []string{"-", "a\n", "a\nb\n", "a\nb\nc\n"}, tail: 100, want: "a\nb\nc\n"},
		{name: "the tail of what came before", outs: []string{"a\nb\n", "a\nb\nc\n"}, tail: 2, want: "b\nc\n"},
		{name: "no tail", outs: []string{"a\nb\n", "a\nb\nc\n"}, tail: 0, want: "c\n"},
		{name: "nothing new", outs: []string{"x\n", "x\n", "x\n"}, tail: 10, want: "x\n"},
		{name: "repeated lines are all shown", outs: []string{"x\n", "x\nx\n", "x\nx\nx\n"}, tail: 10, want: "x\nx\nx\n"},
		{name: "a requeued job starts anew", outs: []string{"a\nb\n", "c\n", "c\nd\n"}, tail: 10, want: "a\nb\nc\nd\n", restarted: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&logServer{outs: tc.outs, final: job.Succeeded})
			defer srv.Close()
			cl, err := New(srv.URL, "tok")
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			restarted := 0
			j, err := cl.FollowLogs(context.Background(), 3, &out, Follow{Tail: tc.tail, Interval: time.Millisecond, Restarted: func() { restarted++ }})
			if err != nil || j.State != job.Succeeded {
				t.Fatalf("FollowLogs = %+v, %v; want the job succeeded", j, err)
			}
			if out.String() != tc.want || restarted != tc.restarted {
				t.Errorf("output %q (restarted %d), want %q (%d)", out.String(), restarted, tc.want, tc.restarted)
			}
		})
	}
}
