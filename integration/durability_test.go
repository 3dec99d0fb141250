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

// TestBuiltinAgentJobsEndWithTheServer kills the server, whose built-in
// agents run a job that started a child of its own, and restarts it: the
// child (which outlived the server before: only the job's first process
// died with it) is stopped by the built-in agents' watchdog, so the job's
// next run after the restart is the only one on its GPU. Judged from the
// processes themselves.
func TestBuiltinAgentJobsEndWithTheServer(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data, dir := t.TempDir(), passableDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	args := []string{"--data", data, "--sim-gpus", "1x1x80", "--heartbeat-timeout", "2s"}
	srv := startServer(t, args...)
	a := newAPI(t, srv.URL, "alice", "dev")
	script := `sleep 300 & echo $! > "$0/child-$GPUPORTAL_RUN"; wait`
	id := submit(t, a, map[string]any{"name": "parent", "gpus": 1, "command": []string{"sh", "-c", script, dir}})
	child := func(run int) int {
		var pid int
		eventually(t, 30*time.Second, fmt.Sprintf("run %d's child", run), func() bool {
			b, err := os.ReadFile(fmt.Sprintf("%s/child-%d", dir, run))
			n, _ := fmt.Sscan(string(b), &pid)
			return err == nil && n == 1
		})
		return pid
	}
	first := child(1)
	srv.kill()
	eventually(t, 15*time.Second, fmt.Sprintf("run 1's child (pid %d) to end with the server", first), func() bool {
		return !alive(first)
	})
	srv2 := startServer(t, args...)
	a2 := newAPI(t, srv2.URL, "alice", "dev")
	second := child(2)
	if !alive(second) || alive(first) {
		t.Errorf("after the restart: run 2's child %d alive %v, run 1's child %d alive %v; want only run 2's",
			second, alive(second), first, alive(first))
	}
	if st := a2.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil); st >= 300 {
		t.Fatalf("cancel: status %d", st)
	}
	eventually(t, 30*time.Second, "run 2's child to end with its cancelled job", func() bool { return !alive(second) })
}
