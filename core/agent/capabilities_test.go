package agent

import (
	"slices"
	"testing"

	"github.com/gpuportal/gpuportal/core/engine"
)

// TestLocalCapabilities: an in-process machine has the capabilities
// core/engine's list (engine.Capabilities) claims for agent.Local.
func TestLocalCapabilities(t *testing.T) {
	want := []string{"UsageReporter", "Resizer", "FilesServer"}
	if got := engine.Capabilities((*Local)(nil)); !slices.Equal(got, want) {
		t.Errorf("agent.Local has %v, core/engine/capabilities.go claims %v", got, want)
	}
}
