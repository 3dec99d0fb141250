package integration

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestCrashWithManyJobs kills the server with SIGKILL while many jobs are
// queued and running on PostgreSQL, starts it again, and checks that every
// job is still there, runs to the end, and never ran twice at once. CI
// runs it with 60 jobs; GPUPORTAL_CRASH_JOBS=500 makes it the benchmark.
func TestCrashWithManyJobs(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	n := 60
	if v := os.Getenv("GPUPORTAL_CRASH_JOBS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("GPUPORTAL_CRASH_JOBS=%q: want a positive number", v)
		}
	}
	data := t.TempDir()
	args := []string{"--data", data, "--db", modelstest.PostgresDSN(t), "--sim-gpus", "4x8x80", "--heartbeat-timeout", "2s", "--policy", "tiresias-l"}
	srv := startServer(t, args...)
	a := newAPI(t, srv.URL, "alice", "dev")
	ids := make([]int64, 0, n)
	for i := range n {
		var j jobView
		body := map[string]any{"name": fmt.Sprint("crash-", i), "gpus": 1 + i%4, "sim": map[string]any{"duration_s": 1 + i%3}}
		if st := a.do("POST", "/api/v1/jobs", body, &j); st != http.StatusCreated {
			t.Fatalf("submit %d: status %d", i, st)
		}
		ids = append(ids, j.ID)
	}
	eventually(t, 30*time.Second, "some jobs to run", func() bool {
		var running []jobView
		a.do("GET", "/api/v1/jobs?state=running", nil, &running)
		return len(running) > 0
	})
	srv.kill()
	began := time.Now()
	srv2 := startServer(t, args...)
	a2 := newAPI(t, srv2.URL, "alice", "dev")
	for _, id := range ids {
		j := a2.waitState(id, time.Duration(30+n/5)*time.Second, "succeeded")
		if j.JCTS == nil {
			t.Errorf("job %d: no JCT", id)
		}
		var history []struct{ State string }
		if st := a2.do("GET", fmt.Sprintf("/api/v1/jobs/%d/history", id), nil, &history); st != http.StatusOK {
			t.Fatalf("history of %d: %d", id, st)
		}
		for i := 1; i < len(history); i++ {
			if history[i].State == "running" && history[i-1].State == "running" {
				t.Errorf("job %d started again while it ran: %v", id, history)
			}
		}
	}
	t.Logf("%d jobs: all finished %v after the restart", n, time.Since(began).Round(time.Second))
}
