package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/client"
)

// TestRetriedSubmissionMakesOneJob (issue 32): a submission whose answer
// is lost and that the client sends again is one job. Over the API, the
// same Idempotency-Key returns the first job (201, Location,
// Idempotent-Replayed) and with another request is a 409. The CLI, whose
// answer a cut network loses after the server stored its job, retries
// with its key and prints that job: the server holds one.
func TestRetriedSubmissionMakesOneJob(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--max-retries", "0")
	alice := newAPI(t, srv.URL, "alice", "dev")

	post := func(key string, body map[string]any) (int, http.Header, jobView) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/jobs", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+alice.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var j jobView
		_ = json.NewDecoder(resp.Body).Decode(&j)
		return resp.StatusCode, resp.Header, j
	}
	body := map[string]any{"name": "keyed", "gpus": 1, "sim": map[string]any{"duration_s": 600}}
	st, h, first := post("key-1", body)
	if st != http.StatusCreated || h.Get("Location") != fmt.Sprintf("/api/v1/jobs/%d", first.ID) || h.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d, Location %q, replayed %q", st, h.Get("Location"), h.Get("Idempotent-Replayed"))
	}
	st, h, again := post("key-1", body)
	if st != http.StatusCreated || again.ID != first.ID || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("again: %d, job %d, replayed %q; want job %d replayed", st, again.ID, h.Get("Idempotent-Replayed"), first.ID)
	}
	body["gpus"] = 2
	if st, _, _ := post("key-1", body); st != http.StatusConflict {
		t.Errorf("the key with another request: %d, want 409", st)
	}
	if st, _, _ := post("has space", body); st != http.StatusBadRequest {
		t.Errorf("a malformed key: %d, want 400", st)
	}

	// The CLI through a network that carries its request and loses the
	// answer.
	fw := newForwarder(t, strings.TrimPrefix(srv.URL, "http://"))
	fw.holdReplies()
	c := newCLI(t, "")
	c.env[3] = "GPUPORTAL_SERVER=http://" + fw.addr()
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := c.run([]string{"GPUPORTAL_TOKEN=" + alice.token}, "job", "submit", "--parsable", "--name", "lost-answer", "--sim-duration", "10m")
		done <- result{out, errOut, code}
	}()
	var stored []jobView
	eventually(t, 30*time.Second, "the CLI's job to be stored", func() bool {
		stored = jobsNamed(t, alice, "lost-answer")
		return len(stored) > 0
	})
	fw.cut() // the answer is lost; the CLI sees the connection fail
	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the CLI did not finish within a minute")
	}
	if r.code != 0 || strings.TrimSpace(r.out) != fmt.Sprint(stored[0].ID) {
		t.Fatalf("CLI: exit %d, printed %q, stderr %q; want job %d", r.code, r.out, r.errOut, stored[0].ID)
	}
	if all := jobsNamed(t, alice, "lost-answer"); len(all) != 1 {
		t.Errorf("the server holds %d jobs named lost-answer, want 1: %+v", len(all), all)
	}
}

// jobsNamed lists a's jobs named name.
func jobsNamed(t *testing.T, a *api, name string) []jobView {
	t.Helper()
	var raw json.RawMessage
	if _, err := a.client().Jobs(withReporter(context.Background(), t), client.JobQuery{Scope: "mine", Limit: 200, Text: name}, client.RawJSON(&raw)); err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	var page []jobView
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	var out []jobView
	for _, j := range page {
		if j.Name == name {
			out = append(out, j)
		}
	}
	return out
}
