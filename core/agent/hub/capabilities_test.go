package hub

import (
	"slices"
	"testing"

	"github.com/gpuportal/gpuportal/core/engine"
)

// TestRemoteNodeCapabilities: a remote agent's machine has the
// capabilities core/engine's list (engine.Capabilities) claims for it.
func TestRemoteNodeCapabilities(t *testing.T) {
	want := []string{"UsageReporter", "Resizer", "RunGPUsReporter", "FilesServer"}
	if got := engine.Capabilities((*remoteNode)(nil)); !slices.Equal(got, want) {
		t.Errorf("a remote node has %v, core/engine/capabilities.go claims %v", got, want)
	}
}
