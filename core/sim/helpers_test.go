package sim

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedTrace returns the path of one of the project's shared traces,
// skipping the test when the shared folder is absent.
func sharedTrace(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("../../../shared/traces", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared trace %s absent: %v", p, err)
	}
	return p
}
