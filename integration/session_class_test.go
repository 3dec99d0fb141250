package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSessionSurvivesBatchStream (issue 30): on the demo's workload
// (serve --demo) on 4 simulated GPUs, with a first queue limit of 20
// GPU-seconds, alice's terminal session runs while she and the demo keep
// submitting one-GPU batch jobs for 40 s. Batch jobs are demoted and
// preempted by newer ones all along; the session, past the limit
// within 20 s, is neither demoted nor preempted: it stays in queue 0 and
// its first run is its only one.
func TestSessionSurvivesBatchStream(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--demo", "--sim-gpus", "1x4x80", "--thresholds", "20")
	alice := newAPI(t, srv.URL, "alice", "dev") // vision
	bob := newAPI(t, srv.URL, "bob", "dev")     // nlp
	shell := submit(t, alice, map[string]any{"name": "shell", "gpus": 1, "session": map[string]any{"type": "terminal"}})
	waitJob(t, alice, shell, 30*time.Second, "running")

	type sub struct {
		by *api
		id int64
	}
	var batch []sub
	stop := time.Now().Add(35 * time.Second)
	for i := 0; time.Now().Before(stop); i++ {
		who, name := alice, "alice-batch"
		if i%3 == 2 {
			who, name = bob, "bob-batch"
		}
		batch = append(batch, sub{who, submit(t, who, map[string]any{"name": fmt.Sprintf("%s-%d", name, i), "gpus": 1,
			"sim": map[string]any{"duration_s": 40}})})
		time.Sleep(1500 * time.Millisecond) // about time: the stream's pace, while the session's service crosses the limit
		if j := alice.job(shell); j.State != "running" || j.Preemptions != 0 {
			t.Fatalf("after %d batch jobs the session is %s with %d preemptions: %s", len(batch), j.State, j.Preemptions, j.Reason)
		}
	}

	j := alice.job(shell)
	if j.State != "running" || j.Preemptions != 0 {
		t.Fatalf("the session is %s with %d preemptions: %s", j.State, j.Preemptions, j.Reason)
	}
	var full struct {
		Queue           int     `json:"queue"`
		AttainedService float64 `json:"attained_service_gpu_s"`
	}
	alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", shell), nil, &full)
	if full.Queue != 0 || full.AttainedService < 20 {
		t.Errorf("the session is in queue %d with %.0f GPU-s attained; want queue 0 past the limit of 20", full.Queue, full.AttainedService)
	}
	var history []struct {
		State  string `json:"state"`
		Detail string `json:"detail"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/history", shell), nil, &history); st != http.StatusOK {
		t.Fatalf("history: status %d", st)
	}
	runs := 0
	var states []string
	for _, e := range history {
		states = append(states, e.State)
		if e.State == "running" {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("the session ran %d times; its history: %s", runs, strings.Join(states, ", "))
	}

	// The stream did press: batch jobs were preempted meanwhile.
	preempted := 0
	for _, b := range batch {
		preempted += b.by.job(b.id).Preemptions
	}
	if preempted == 0 {
		t.Errorf("no batch job of the %d was preempted: the stream did not exercise preemption", len(batch))
	}
	t.Logf("%d batch jobs submitted, %d preemptions among them; the session attained %.0f GPU-s in queue %d, 1 run",
		len(batch), preempted, full.AttainedService, full.Queue)
}
