package wire

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpuportal/gpuportal/core/job"
)

// TestAccountRefusalCrossesTheWire: an agent's refusal for the job's Unix
// account reaches the server as a *job.AccountError naming the machine;
// other errors stay plain, and an old agent's refusal (no no_account) too.
func TestAccountRefusalCrossesTheWire(t *testing.T) {
	refusal := fmt.Errorf("start job 3 on gpu-07: %w", &job.AccountError{Account: "alice", Node: "gpu-07", Why: "it is root"})
	tests := []struct {
		name    string
		ack     *Ack
		refused bool
		want    string
	}{
		{"success", AckError(nil), false, ""},
		{"a refused account", AckError(refusal), true, "alice's Unix account on gpu-07 may not run jobs: it is root"},
		{"another error", AckError(errors.New("no GPU 9")), false, "no GPU 9"},
		{"an old agent", &Ack{Error: "alice has no Unix account on gpu-07"}, false, "alice has no Unix account on gpu-07"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := roundTrip(t, *tc.ack)
			got := (&err).Err("gpu-07")
			var ae *job.AccountError
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("err %v, want none", got)
			case tc.want != "" && (got == nil || got.Error() != tc.want):
				t.Fatalf("err %v, want %q", got, tc.want)
			case errors.As(got, &ae) != tc.refused || errors.Is(got, job.ErrNoAccount) != tc.refused:
				t.Fatalf("err %v: refusal %v, want %v", got, !tc.refused, tc.refused)
			}
		})
	}
}
