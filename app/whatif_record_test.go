package app

import (
	"testing"

	"github.com/gpuportal/gpuportal/models"
)

// TestWhatIfRecordClass: a session's record replays as a session, a
// batch job's as a batch job.
func TestWhatIfRecordClass(t *testing.T) {
	if c := whatIfRecord(&models.Job{SessionType: "terminal"}).Class; c != "session" {
		t.Errorf("a terminal session's class is %q, want session", c)
	}
	if c := whatIfRecord(&models.Job{}).Class; c != "" {
		t.Errorf("a batch job's class is %q, want empty", c)
	}
}
