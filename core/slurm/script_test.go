package slurm

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestJobScriptSaysWhereARunStarts: the batch script's first line says
// what the run resumes from, as the agents' output does, or that a later
// run starts from scratch when its checkpoint folder is empty; a first
// run says nothing.
func TestJobScriptSaysWhereARunStarts(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := writeScript(script); err != nil {
		t.Fatal(err)
	}
	empty, full := filepath.Join(dir, "empty"), filepath.Join(dir, "full")
	for _, d := range []string{empty, full} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(full, "step"), []byte("3"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"first run", []string{"GPUPORTAL_RUN=1", "GPUPORTAL_CHECKPOINT_DIR=" + empty}, ""},
		{"later run, empty folder", []string{"GPUPORTAL_RUN=2", "GPUPORTAL_CHECKPOINT_DIR=" + empty},
			"gpuportal: run 2 starts from scratch: its checkpoint folder is empty\n"},
		{"later run, resumed", []string{"GPUPORTAL_RUN=3", "GPUPORTAL_CHECKPOINT_DIR=" + full, "GPUPORTAL_RESUME=1",
			"GPUPORTAL_RESUME_RUN=2", "GPUPORTAL_CHECKPOINT_AT=2026-11-28T12:00:00Z"},
			"gpuportal: run 3 resumes from the checkpoint run 2 wrote at 2026-11-28T12:00:00Z (GPUPORTAL_RESUME=1)\n"},
		{"later run, a checkpoint without RESUME", []string{"GPUPORTAL_RUN=2", "GPUPORTAL_CHECKPOINT_DIR=" + full}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(script, "true")
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != tc.want {
				t.Errorf("output %q, %v; want %q", out, err, tc.want)
			}
		})
	}
}
