package slurm

import (
	"slices"
	"testing"

	"github.com/gpuportal/gpuportal/core/engine"
)

// TestNodeCapabilities: a Slurm node has the capabilities core/engine's
// list (engine.Capabilities) claims for it.
func TestNodeCapabilities(t *testing.T) {
	want := []string{"ResumeReporter", "LiveMemoryNode"}
	if got := engine.Capabilities((*node)(nil)); !slices.Equal(got, want) {
		t.Errorf("a Slurm node has %v, core/engine/capabilities.go claims %v", got, want)
	}
}
