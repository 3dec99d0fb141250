package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// TestRunsResumeFromTheJobsCheckpoint: a job's first run writes into its
// checkpoint folder; its second finds it, with GPUPORTAL_RESUME=1 and the
// run that wrote it, and says so in its usage and its output. A first run
// of another job finds nothing and is told nothing.
func TestRunsResumeFromTheJobsCheckpoint(t *testing.T) {
	a, exits := newTestAgent(t, time.Second)
	show := `echo "resume=${GPUPORTAL_RESUME:-} from=${GPUPORTAL_RESUME_RUN:-} at=${GPUPORTAL_CHECKPOINT_AT:-}"`
	runs := []struct {
		job, run int64
		script   string
		want     string // in the run's output
		resume   job.Resume
	}{
		{7, 1, show + `; echo 41 > "$GPUPORTAL_CHECKPOINT_DIR/step"; sleep 1`, "resume= from= at=\n", job.Resume{Run: 1}},
		{7, 2, show + `; sleep 2`, "resume=1 from=1 at=2", job.Resume{Run: 2, FromRun: 1}},
		{8, 1, show + `; sleep 2`, "resume= from= at=\n", job.Resume{Run: 1}},
	}
	for _, r := range runs {
		if err := a.Start(context.Background(), job.Spec{JobID: r.job, Run: r.run, Command: []string{"sh", "-c", r.script}, GPUs: []int{0}}); err != nil {
			t.Fatal(err)
		}
		var got *job.Resume
		for _, u := range a.JobUsage(time.Now()) {
			if u.JobID == r.job {
				got = u.Resume
			}
		}
		if got == nil || got.Run != r.resume.Run || got.FromRun != r.resume.FromRun || got.Resumed() != (r.resume.FromRun > 0) {
			t.Errorf("job %d run %d: usage says it resumed %+v, want %+v", r.job, r.run, got, r.resume)
		}
		if ex := waitExit(t, exits); ex.ExitCode != 0 {
			t.Fatalf("job %d run %d: %+v", r.job, r.run, ex)
		}
		out, err := os.ReadFile(a.LogPath(r.job))
		if err != nil || !strings.Contains(string(out), r.want) {
			t.Errorf("job %d run %d: output %q, want %q in it", r.job, r.run, out, r.want)
		}
	}
	out, _ := os.ReadFile(a.LogPath(7))
	if !strings.Contains(string(out), "gpuportal: run 2 resumes from the checkpoint run 1 wrote at") {
		t.Errorf("the second run's output does not say what it resumed from: %q", out)
	}
}

func TestCheckpointWriter(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	runs := []runStart{{1, at(0)}, {2, at(10)}, {4, at(30)}}
	tests := []struct {
		name  string
		write time.Time
		run   int64
		want  int64
	}{
		{"written by the first run", at(5), 5, 1},
		{"written by the second", at(12), 5, 2},
		{"written by the last before the run", at(31), 5, 4},
		{"the run itself is not its own writer", at(31), 4, 2},
		{"written before any run", at(-1), 5, 0},
		{"the instant a run started", at(10), 5, 2},
		{"stamped by the coarse file clock a tick before its run started", at(10).Add(-4 * time.Millisecond), 5, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := writer(runs, tc.write, tc.run); got != tc.want {
				t.Errorf("writer = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNewestWrite(t *testing.T) {
	dir := t.TempDir()
	if got := folderState(dir).At; !got.IsZero() {
		t.Errorf("an empty folder: %v, want zero", got)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	old, young := time.Unix(1_700_000_000, 0), time.Unix(1_700_000_100, 0)
	for name, at := range map[string]time.Time{"a": old, "sub/b": young} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	// A link is not followed, whatever it points at.
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if got := folderState(dir).At; !got.Equal(young) {
		t.Errorf("newest write %v, want %v (sub/b)", got, young)
	}
}
