package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPreemptedJobResumesFromCheckpoint runs a real process that counts
// steps into its checkpoint folder; a newer job preempts it (tiresias-l
// with a tiny first queue), and when it runs again it picks up where it
// stopped instead of starting over.
func TestPreemptedJobResumesFromCheckpoint(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, "--data", data, "--sim-gpus", "1x1x80", "--thresholds", "3", "--grace", "2s")
	a := newAPI(t, srv.URL, "alice", "dev")
	// Ten steps of 0.5s; each finished step is saved; SIGTERM saves and exits.
	script := `f="$GPUPORTAL_CHECKPOINT_DIR/step"; i=$(cat "$f" 2>/dev/null || echo 0)
echo "start at step $i"
trap 'echo "$i" > "$f"; echo "saved at step $i"; exit 143' TERM
while [ "$i" -lt 10 ]; do sleep 0.5 & wait $!; i=$((i+1)); echo "$i" > "$f"; done
echo "done at step $i"`
	var long jobView
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "counter", "gpus": 1, "command": []string{"sh", "-c", script}}, &long); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	a.waitState(long.ID, 30*time.Second, "running")
	time.Sleep(4 * time.Second) // past 3 GPU-seconds: demoted to queue 1
	var short jobView
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "short", "gpus": 1, "sim": map[string]any{"duration_s": 1}}, &short); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	a.waitState(short.ID, 30*time.Second, "succeeded")
	done := a.waitState(long.ID, 60*time.Second, "succeeded")
	if done.Preemptions != 1 {
		t.Errorf("preemptions = %d, want 1", done.Preemptions)
	}
	out, err := os.ReadFile(filepath.Join(data, "agents", "node-0", "jobs", fmt.Sprint(long.ID), "output.log"))
	if err != nil {
		t.Fatal(err)
	}
	log := string(out)
	if !strings.Contains(log, "start at step 0") || !strings.Contains(log, "saved at step") || !strings.Contains(log, "done at step 10") ||
		strings.Count(log, "start at step 0") != 1 {
		t.Errorf("output does not show a resume from the checkpoint:\n%s", log)
	}
}
