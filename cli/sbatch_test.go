package cli

import (
	"fmt"
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
	}{
		{"no GPU asked: one a machine, said in words", sbatch.Options{Nodes: 2}, 2,
			"asks for no GPU (--gres=gpu:N, --gpus): a gpuportal job has at least one GPU on each machine; it asks for 2"},
		{"GPUs per machine times machines", sbatch.Options{Nodes: 2, GPUsPerNode: 4}, 8, "--nodes=2: the scheduler places the job's 8 GPUs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var notes []string
			req := api.SubmitRequest{}
			sbatchResources(&req, tc.o, map[string]bool{}, "train.sbatch", func(format string, a ...any) {
				notes = append(notes, fmt.Sprintf(format, a...))
			})
			if req.GPUs != tc.wantGPUs {
				t.Errorf("gpus = %d, want %d", req.GPUs, tc.wantGPUs)
			}
			if all := strings.Join(notes, "\n"); !strings.Contains(all, tc.wantNote) {
				t.Errorf("notes:\n%s\nwant one with %q", all, tc.wantNote)
			}
		})
	}
}
