package engine

import (
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/job"
)

// TestAccountRefusal: a machine without the owner's Unix account refuses
// the start; the job waits again with no failure counted and starts on a
// machine that has the account, while other owners' jobs still use the
// first machine.
func TestAccountRefusal(t *testing.T) {
	store := newMemStore(
		Job{ID: 1, User: "alice", Account: "alice", GPUs: 1, Command: []string{"true"}, SubmittedAt: t0},
	)
	small, big := newFakeNode("gpu-07", 1), newFakeNode("gpu-08", 4)
	small.noAccounts = map[string]bool{"alice": true}
	e, clock := newTestEngine(t, store, small, big)
	mustPass(t, e) // best fit: gpu-07, which refuses
	if small.refusals != 1 || store.state(1) != job.Queued || store.jobs[1].Failures != 0 || store.end[1] != nil {
		t.Fatalf("refusals %d, state %s, failures %d, exit %v; want one refusal and the job queued with no failure",
			small.refusals, store.state(1), store.jobs[1].Failures, store.end[1])
	}
	if want := "alice has no Unix account on gpu-07"; store.reason[1] != want {
		t.Errorf("reason %q, want %q", store.reason[1], want)
	}
	clock.t = clock.t.Add(1e9)
	mustPass(t, e)
	if store.state(1) != job.Running || len(big.starts) != 1 || big.starts[0].Account != "alice" {
		t.Fatalf("state %s, starts on gpu-08 %+v; want the job running there as alice", store.state(1), big.starts)
	}
	if small.refusals != 1 {
		t.Errorf("gpu-07 asked %d times, want once", small.refusals)
	}
	// bob has an account on gpu-07: his job goes there.
	store.jobs[2] = &Job{ID: 2, User: "bob", Account: "bob", GPUs: 1, Command: []string{"true"}, SubmittedAt: clock.t, State: job.Queued}
	mustPass(t, e)
	if len(small.starts) != 1 || small.starts[0].JobID != 2 {
		t.Errorf("starts on gpu-07 %+v, want bob's job 2", small.starts)
	}
}

// TestAccountRefusalWaitsWithReason: a job whose owner has no account on
// any free machine waits, saying so, and tries again once the machine
// reconnects or AccountRecheck has passed.
func TestAccountRefusalWaitsWithReason(t *testing.T) {
	store := newMemStore(Job{ID: 1, User: "alice", Account: "alice", GPUs: 1, Command: []string{"true"}, SubmittedAt: t0})
	n := newFakeNode("gpu-07", 2)
	n.noAccounts = map[string]bool{"alice": true}
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	mustPass(t, e)
	if n.refusals != 1 || store.state(1) != job.Queued {
		t.Fatalf("refusals %d, state %s; want one refusal, then the job waiting", n.refusals, store.state(1))
	}
	if r := e.Waits()[1].Reason; !strings.HasPrefix(r, "alice has no Unix account on gpu-07; ") {
		t.Errorf("wait reason %q, want it to start with the account", r)
	}
	clock.t = clock.t.Add(AccountRecheck)
	mustPass(t, e)
	if n.refusals != 2 {
		t.Errorf("refusals %d after AccountRecheck, want a second try", n.refusals)
	}
	// The account is created and the machine reconnects: the job starts.
	delete(n.noAccounts, "alice")
	e.forgetAccounts("gpu-07") // as AddNode does
	mustPass(t, e)
	if store.state(1) != job.Running {
		t.Errorf("state %s after the machine reconnected, want running", store.state(1))
	}
}

// TestAccountErrorWords: what a waiting job says.
func TestAccountErrorWords(t *testing.T) {
	for _, tc := range []struct {
		err  *job.AccountError
		want string
	}{
		{&job.AccountError{Account: "alice", Node: "gpu-07"}, "alice has no Unix account on gpu-07"},
		{&job.AccountError{Account: "root", Node: "gpu-07", Why: "it is root"}, "root's Unix account on gpu-07 may not run jobs: it is root"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}
