package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestFencedAt: a run that ended while no server had been heard for the
// heartbeat timeout was fenced, not failed, even if the silence has ended
// since.
func TestFencedAt(t *testing.T) {
	c := &Client{}
	now := time.Now()
	c.timeout.Store(int64(2 * time.Second))
	c.heard.Store(now.Add(-10 * time.Second).UnixNano())
	c.hear() // heard again now, after a 10 s silence: fenced from -8 s to now
	tests := []struct {
		name  string
		at    time.Time
		grace time.Duration
		want  bool
	}{
		{"before the silence", now.Add(-11 * time.Second), 0, false},
		{"early in the silence, before the timeout", now.Add(-9 * time.Second), 0, false},
		{"within the silence, after the timeout", now.Add(-5 * time.Second), 0, true},
		{"just before the lease ran out", now.Add(-8*time.Second - 100*time.Millisecond), 0, true},
		{"after a server was heard again", now.Add(500 * time.Millisecond), 0, false},
		// Sent SIGTERM in the silence, it died after the reconnection
		// (issue 32: "killed by terminated", failed for good).
		{"within the grace after the silence", now.Add(time.Second), 5 * time.Second, true},
		{"past the grace after the silence", now.Add(time.Second), 500 * time.Millisecond, false},
		{"a new silence past the timeout", now.Add(3 * time.Second), 0, true},
	}
	for _, tc := range tests {
		if got := c.fencedAt(tc.at, tc.grace); got != tc.want {
			t.Errorf("%s: fencedAt = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// nopWriteCloser is a watchdog's pipe that goes nowhere.
type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// TestWatchdogLeaseEndsTheSilence (issue 32, the 30-minute soak): the
// watchdog's lease, renewed at most every fifth of a second, may run out
// up to that much before the heartbeat timeout. A silence that outlasted
// the lease but not the timeout still fenced runs (the watchdog stopped
// them): their exits, after a server was heard again, are fenced, not the
// job's failure.
func TestWatchdogLeaseEndsTheSilence(t *testing.T) {
	now := time.Now()
	wd := &WatchdogLink{w: nopWriteCloser{}, lease: now.Add(-150 * time.Millisecond)}
	c := &Client{cfg: ClientConfig{Watchdog: wd}}
	c.timeout.Store(int64(2 * time.Second))
	c.heard.Store(now.Add(-1900 * time.Millisecond).UnixNano()) // silent 1.9 s < T, past the lease
	c.hear()
	if !c.fencedAt(time.Now().Add(500*time.Millisecond), time.Second) {
		t.Error("an exit in the grace after a silence past the watchdog's lease is not fenced")
	}
	if c.fencedAt(time.Now().Add(time.Second), 500*time.Millisecond) {
		t.Error("an exit past the grace counts as fenced")
	}
}

// A run the agent fenced is not the job's failure however late it dies:
// its exit says so itself, so that a server heard again before the run
// ended (fencedAt no longer covers it) does not fail the job (issue 32).
func TestFencedRunExitIsInfra(t *testing.T) {
	exits := make(chan job.Exit, 1)
	a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 8192), WorkDir: t.TempDir(), Grace: time.Second}, exits)
	if err != nil {
		t.Fatal(err)
	}
	ref := job.RunRef{Job: 21, Run: 1}
	if err := a.Start(context.Background(), job.Spec{JobID: 21, Run: 1, Command: []string{"sleep", "30"}, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	if a.fenced(ref) {
		t.Fatal("the run was fenced before it was")
	}
	_ = a.Stop(context.Background(), ref)
	ex := waitExit(t, exits)
	if !ex.Infra || ex.ExitCode == 0 || !strings.Contains(ex.Err, "heard no server") {
		t.Errorf("exit %+v: want a fenced end, not the job's", ex)
	}
}

// The first server heard ends no silence: an exit just after the first
// connection, within the kill grace, is the job's own (a job failing
// there was requeued as fenced, again and again).
func TestFirstConnectionIsNoSilence(t *testing.T) {
	c := &Client{}
	c.timeout.Store(int64(2 * time.Second))
	c.hear()
	if c.fencedAt(time.Now().Add(100*time.Millisecond), time.Second) {
		t.Error("an exit just after the first connection counts as fenced")
	}
}
