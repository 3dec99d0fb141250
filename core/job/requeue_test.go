package job

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/memest"
)

// TestRequeueOutcome: a requeue that brings a larger estimate makes
// progress; one that does not is a stall, which backs off, doubling, and
// the fifth in a row holds the job, saying what to do.
func TestRequeueOutcome(t *testing.T) {
	started := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4096, Source: memest.Declared}
	same := started
	same.Source = memest.Measured
	at := time.Date(2026, 11, 22, 13, 0, 0, 0, time.UTC)
	rq := func(est memest.Estimate) Requeue {
		return Requeue{Estimate: est, Node: "n1", At: at, Backoff: 10 * time.Second}
	}
	tests := []struct {
		name       string
		est        memest.Estimate
		stalls     int // before
		wantStalls int
		wantWait   time.Duration // 0: no RetryAt
		wantHeld   bool
		wantReason string
	}{
		{"a larger E is progress", memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 9000}, 3, 0, 0, false,
			"outgrew its lane: requeued with E=9000 MiB, P=1000 MiB (on n1)"},
		{"a larger P is progress", memest.Estimate{PersistentMiB: 1200, EphemeralMiB: 4096}, 0, 0, 0, false,
			"outgrew its lane: requeued with E=4096 MiB, P=1200 MiB (on n1)"},
		{"the same estimate is a stall", same, 0, 1, 10 * time.Second, false,
			"outgrew its lane again with no larger estimate (E=4096 MiB, P=1000 MiB, on n1): requeue 1 of 5 without progress before it is held; next try at 13:00:10"},
		{"a smaller estimate is a stall", memest.Estimate{PersistentMiB: 900, EphemeralMiB: 4000}, 0, 1, 10 * time.Second, false, "requeue 1 of 5"},
		{"the backoff doubles", same, 3, 4, 80 * time.Second, false, "requeue 4 of 5 without progress before it is held; next try at 13:01:20"},
		{"the fifth stall holds the job", same, 4, 5, 0, true,
			"held: requeued 5 times in a row for outgrowing its lane with no larger estimate (E=4096 MiB, P=1000 MiB, last on n1), " +
				"so another run would end the same way; cancel it and submit it again with --mem-ephemeral-mib above 4096, or without --share"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := rq(tc.est).Outcome(started, tc.stalls)
			if out.Stalls != tc.wantStalls || out.Held != tc.wantHeld || !strings.Contains(out.Reason, tc.wantReason) {
				t.Errorf("outcome %+v; want %d stalls, held %v, a reason with %q", out, tc.wantStalls, tc.wantHeld, tc.wantReason)
			}
			switch {
			case tc.wantWait == 0 && out.RetryAt != nil:
				t.Errorf("retry at %v, want none", out.RetryAt)
			case tc.wantWait > 0 && (out.RetryAt == nil || !out.RetryAt.Equal(at.Add(tc.wantWait))):
				t.Errorf("retry at %v, want %v", out.RetryAt, at.Add(tc.wantWait))
			}
		})
	}
}
