package engine

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// everyCapability is a Node with every optional capability.
type everyCapability struct{ Node }

func (everyCapability) JobUsage(time.Time) []job.Usage                     { return nil }
func (everyCapability) Resumes() map[int64]job.Resume                      { return nil }
func (everyCapability) Resize(context.Context, int64, job.Resources) error { return nil }
func (everyCapability) RunGPUs(int64) ([]int, bool)                        { return nil, false }
func (everyCapability) LiveMemoryUnavailable() string                      { return "" }
func (everyCapability) JobFiles(int64, string) jobfiles.Files              { return nil }

// TestCapabilitiesMatchTheTable: Capabilities names every capability of
// capabilities.go's table, in its order, and none of a bare Node's, so a
// capability added to one and not the other fails here.
func TestCapabilitiesMatchTheTable(t *testing.T) {
	src, err := os.ReadFile("capabilities.go")
	if err != nil {
		t.Fatal(err)
	}
	var table []string
	in := false
	for line := range strings.Lines(string(src)) {
		f := strings.Fields(strings.TrimPrefix(line, "//\t"))
		switch {
		case !strings.HasPrefix(line, "//\t") || len(f) == 0:
			in = false
		case f[0] == "capability":
			in = true
		case in:
			table = append(table, f[0])
		}
	}
	if len(table) == 0 {
		t.Fatal("no capability table in capabilities.go")
	}
	if got := Capabilities(everyCapability{}); !slices.Equal(got, table) {
		t.Errorf("Capabilities of a node with every capability = %v, the table lists %v", got, table)
	}
	if got := Capabilities(&fakeNode{}); len(got) != 0 {
		t.Errorf("Capabilities of a bare node = %v, want none", got)
	}
}
