package sim

import (
	"path/filepath"
	"testing"
)

// sharedTrace returns the path of one of the real traces the repository
// keeps for its tests (testdata/traces/README.md).
func sharedTrace(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join("../../testdata/traces", name)
}
