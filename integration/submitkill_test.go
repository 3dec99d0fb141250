package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSQLiteSubmissionsSurviveKill submits jobs on SQLite from one client,
// then from eight at once, kills the server with SIGKILL while they
// submit, starts it again and checks that every acknowledged submission
// is there. It logs the submissions per second at each concurrency: with
// GPUPORTAL_SUBMIT_QUEUE=10000 (jobs queued first) and
// GPUPORTAL_SUBMIT_SECONDS=10 it is the figure to set beside sbatch.
func TestSQLiteSubmissionsSurviveKill(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	queue, secs := envInt(t, "GPUPORTAL_SUBMIT_QUEUE", 0), envInt(t, "GPUPORTAL_SUBMIT_SECONDS", 1)
	data := t.TempDir()
	// A cluster too small for the jobs: they wait, as a long queue does.
	args := []string{"--data", data, "--sim-gpus", "1x2x80"}
	srv := startServer(t, args...)
	a := newAPI(t, srv.URL, "alice", "dev")
	submit := func(name string) (int64, error) {
		body, _ := json.Marshal(map[string]any{"name": name, "gpus": 2, "sim": map[string]any{"duration_s": 60}})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/jobs", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+a.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var j jobView
		if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || resp.StatusCode != http.StatusCreated {
			return 0, fmt.Errorf("status %d: %v", resp.StatusCode, err)
		}
		return j.ID, nil
	}
	for i := range queue {
		if _, err := submit(fmt.Sprint("queued-", i)); err != nil {
			t.Fatalf("queue job %d: %v", i, err)
		}
	}
	var (
		mu    sync.Mutex
		acked []int64
	)
	run := func(workers int, d time.Duration, stop <-chan struct{}) int {
		var n atomic.Int64
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		for w := range workers {
			wg.Go(func() {
				for i := 0; time.Now().Before(end); i++ {
					select {
					case <-stop:
						return
					default:
					}
					id, err := submit(fmt.Sprintf("c%d-w%d-%d", workers, w, i))
					if err != nil {
						return // the server was killed
					}
					n.Add(1)
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return int(n.Load())
	}
	d := time.Duration(secs) * time.Second
	n1 := run(1, d, nil)
	n8 := run(8, d, nil)
	t.Logf("SQLite submissions over %d queued: %.0f jobs/s at concurrency 1, %.0f at 8", queue, float64(n1)/d.Seconds(), float64(n8)/d.Seconds())

	// Now kill it while eight clients submit.
	stop := make(chan struct{})
	done := make(chan int)
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	go func() { done <- run(8, time.Minute, stop) }()
	eventually(t, 30*time.Second, "the eight clients to have 16 submissions acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= before+16
	})
	srv.kill()
	close(stop)
	<-done
	srv2 := startServer(t, args...)
	a2 := newAPI(t, srv2.URL, "alice", "dev")
	mu.Lock()
	defer mu.Unlock()
	for _, id := range acked {
		var j jobView
		if st := a2.do("GET", fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK || j.ID != id {
			t.Errorf("acknowledged job %d: status %d after the restart", id, st)
		}
	}
	t.Logf("%d acknowledged submissions, all there after SIGKILL", len(acked))
}

// envInt reads a whole number of at least 0 from the environment.
func envInt(t testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a whole number", name, v)
	}
	return n
}
