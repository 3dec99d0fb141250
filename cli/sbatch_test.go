package cli

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/sbatch"
)

// TestSbatchResourcesNotes checks the GPUs a script's directives ask for
// and what the client says of them.
func TestSbatchResourcesNotes(t *testing.T) {
	tests := []struct {
		name     string
		o        sbatch.Options
		wantGPUs int
		wantNote string
		wantEnv  map[string]string // nil: none
		perGPU   bool
	}{
		{"no GPU asked: one a machine, said in words", sbatch.Options{Nodes: 2}, 2,
			"asks for no GPU (--gres=gpu:N, --gpus): a gpuportal job has at least one GPU on each machine; it asks for 2", nil, false},
		{"GPUs per machine times machines", sbatch.Options{Nodes: 2, GPUsPerNode: 4}, 8, "--nodes=2: the scheduler places the job's 8 GPUs", nil, false},
		{"a task per GPU: the script runs once a GPU", sbatch.Options{Nodes: 2, GPUsPerNode: 4, NTasksPerNode: 4}, 8,
			"4 tasks a machine, one per GPU: the script runs once per GPU", nil, true},
		{"fewer tasks than GPUs: srun steps start them", sbatch.Options{Nodes: 2, GPUsPerNode: 4, NTasksPerNode: 2}, 8,
			"2 tasks a machine: the script runs once a machine, and each srun step in it starts 2 there",
			map[string]string{"SLURM_TASKS_PER_NODE": "2(x2)"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var notes []string
			req := api.SubmitRequest{}
			sbatchResources(&req, tc.o, map[string]bool{}, "train.sbatch", func(format string, a ...any) {
				notes = append(notes, fmt.Sprintf(format, a...))
			})
			if req.GPUs != tc.wantGPUs || req.TasksPerGPU != tc.perGPU {
				t.Errorf("gpus = %d, a task per GPU %v; want %d, %v", req.GPUs, req.TasksPerGPU, tc.wantGPUs, tc.perGPU)
			}
			if !reflect.DeepEqual(req.Env, tc.wantEnv) {
				t.Errorf("env = %v, want %v", req.Env, tc.wantEnv)
			}
			if all := strings.Join(notes, "\n"); !strings.Contains(all, tc.wantNote) {
				t.Errorf("notes:\n%s\nwant one with %q", all, tc.wantNote)
			}
		})
	}
}

// TestSbatchErrorsSaySbatch: the server's refusal of a script's job says
// it is sbatch's, as every other command's errors name it; it read
// "gpuportal: time_limit: ...".
func TestSbatchErrorsSaySbatch(t *testing.T) {
	fake := &fakeAPI{routes: map[string]fakeAnswer{
		"POST /api/v1/jobs": {400, `{"error":"time_limit: team vision allows at most 02:00:00 per job"}`},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	script := filepath.Join(dir, "long.sbatch")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n#SBATCH --time=3:00:00\ntrue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{jobTokenEnv: "tok"}
	_, _, err := cliRun(srv.URL, env, dir, "sbatch", script)
	if err == nil || !strings.HasPrefix(err.Error(), "sbatch: time_limit: team vision allows") {
		t.Errorf("err = %v; want it to begin with sbatch: time_limit", err)
	}
	if _, _, err := cliRun(srv.URL, env, dir, "sbatch", "--tiem=1", script); err == nil || !strings.HasPrefix(err.Error(), "sbatch: --tiem=1: not an sbatch option") {
		t.Errorf("err = %v; want one sbatch: before the option", err)
	}
}
