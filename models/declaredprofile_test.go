package models_test

import (
	"testing"

	"github.com/gpuportal/gpuportal/models"
)

// TestStoredProfileThatDoesNotDecode: a stored profile that does not
// decode is an error, named.
func TestStoredProfileThatDoesNotDecode(t *testing.T) {
	t.Parallel()
	bad := &models.Job{ID: 9, CPUProfile: `{"family":"x","cpu":[[1,0.9],[2,0.5]]}`}
	if _, err := bad.DeclaredProfile(); err == nil {
		t.Error("a falling stored curve decoded")
	}
}
