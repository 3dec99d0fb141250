package integration

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReservationSurvivesRestart (issue 30), judged from outside through
// the API: on one simulated machine of 2 GPUs, a bound of 15 s, alice's
// 1-GPU job without a time limit runs and her 2-GPU job waits. Once it
// shows a reservation the server is killed (SIGKILL) and started again on
// the same database: the job shows the same reservation (the same GPUs,
// from the same time, due at the same time, the reason naming them alike)
// and starts by its deadline, its due time plus the bound. Made afresh
// after the restart, the reservation's start would move: the running
// job's end is estimated anew, later as it has run longer. The machine is
// a separate agent, as in a cluster, so that the running job outlives
// the server: the built-in agent died with it, and the 2-GPU job started
// on the GPUs that freed, sometimes before the first look after the
// restart (CI).
func TestReservationSurvivesRestart(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	const bound = 15 * time.Second
	// A grace of 2 s: a reservation past its deadline acts the grace
	// (its handover) before it (sched.Config.HandoverS). No lead: the job
	// is due at the bound and its deadline is twice the bound, time for
	// the restart between the two (the lead: TestBigJobReservedInStream).
	args := []string{"--data", t.TempDir(), "--reserve-after", bound.String(), "--reserve-lead", "0", "--grace", "2s"}
	srv := startAgentServer(t, args...)
	startAgent(t, srv.URL, "node-0") // one simulated machine of 2 GPUs
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	long := submit(t, alice, map[string]any{"name": "long", "gpus": 1, "sim": map[string]any{"duration_s": 600}})
	waitJob(t, alice, long, 30*time.Second, "running")
	big := submit(t, alice, map[string]any{"name": "big", "gpus": 2, "sim": map[string]any{"duration_s": 2}})

	get := func(a *api) reservationView {
		t.Helper()
		var j reservationView
		if st := a.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", big), nil, &j); st != http.StatusOK {
			t.Fatalf("GET job %d: status %d", big, st)
		}
		return j
	}
	var before reservationView
	eventually(t, 4*bound, "the 2-GPU job to show a reservation", func() bool {
		before = get(alice)
		if before.State != "queued" {
			t.Fatalf("the 2-GPU job is %s before it was reserved: %s", before.State, before.Reason)
		}
		return before.Reservation != nil
	})
	r := before.Reservation
	if r.Due.Sub(before.SubmittedAt.Add(bound)).Abs() > time.Second {
		t.Errorf("due %v; want its submission plus the bound, %v", r.Due, before.SubmittedAt.Add(bound))
	}
	srv.kill()
	srv2 := startAgentServer(t, append(args, "--addr", strings.TrimPrefix(srv.URL, "http://"))...)
	waitGPUs(t, srv2.URL, 2)
	alice2 := newAPI(t, srv2.URL, "alice", "dev")

	var after reservationView
	eventually(t, 4*bound, "the 2-GPU job to show its reservation again, or start", func() bool {
		after = get(alice2)
		return after.Reservation != nil || after.State != "queued"
	})
	if a := after.Reservation; a == nil {
		t.Errorf("after the restart the 2-GPU job is %s with no reservation: %s", after.State, after.Reason)
	} else {
		if !slices.Equal(a.GPUs, r.GPUs) || a.Count != r.Count {
			t.Errorf("after the restart it holds %v (%d GPUs); before, %v (%d)", a.GPUs, a.Count, r.GPUs, r.Count)
		}
		if a.From.Sub(r.From).Abs() >= time.Second {
			t.Errorf("after the restart its GPUs are expected free from %s; before, from %s", a.From.Format(time.RFC3339Nano), r.From.Format(time.RFC3339Nano))
		}
		if !a.Due.Equal(r.Due) {
			t.Errorf("after the restart it is due since %s; before, since %s", a.Due.Format(time.RFC3339Nano), r.Due.Format(time.RFC3339Nano))
		}
		// The part of its reason that names the reservation: "GPUs
		// node-0:0-1 reserved for this job".
		clause := func(reason string) string {
			for part := range strings.SplitSeq(reason, "; ") {
				if strings.Contains(part, "reserved for this job") {
					return part
				}
			}
			return ""
		}
		if c := clause(before.Reason); c == "" || clause(after.Reason) != c {
			t.Errorf("after the restart the job says %q; before, %q", after.Reason, before.Reason)
		}
	}
	j := waitJob(t, alice2, big, 4*bound, "running", "succeeded")
	deadline := r.Due.Add(bound)
	// The pass that starts it comes at the deadline's recheck, within the
	// engine's interval of it.
	if j.StartedAt == nil || j.StartedAt.After(deadline.Add(2*time.Second)) {
		t.Errorf("the 2-GPU job started at %v; want by its deadline %s", j.StartedAt, deadline.Format(time.RFC3339Nano))
	}
	t.Logf("reserved %v from %s, due %s; after the restart %+v; started %v (deadline %s)",
		r.GPUs, r.From.Format("15:04:05.000"), r.Due.Format("15:04:05.000"), after.Reservation, j.StartedAt, deadline.Format("15:04:05.000"))
}
