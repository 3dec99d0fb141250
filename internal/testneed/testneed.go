// Package testneed is for tests that need a part of the machine (root,
// writable cgroups, a user account) that a developer's machine may lack:
// there they skip, saying what is missing; under CI=true, where every
// part must be there, they fail instead, so a test never passes in CI by
// not running.
package testneed

import (
	"fmt"
	"os"
	"testing"
)

// Missing ends t because the machine lacks what the message says: a
// skip, or under CI=true a failure.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (under CI=true every part the tests need must be there)", msg)
	}
	t.Skip(msg)
}
