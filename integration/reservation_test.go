package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// reservationView is the part of the API's job a reservation test reads.
type reservationView struct {
	State       string     `json:"state"`
	Reason      string     `json:"reason"`
	SubmittedAt time.Time  `json:"submitted_at"`
	StartedAt   *time.Time `json:"started_at"`
	Preemptions int        `json:"preemptions"`
	Reservation *struct {
		GPUs  []string  `json:"gpus"`
		Count int       `json:"count"`
		From  time.Time `json:"from"`
		Due   time.Time `json:"due"`
	} `json:"reservation"`
}

// TestBigJobReservedInStream (issue 30), judged from outside through the
// API: on two simulated machines of 8 GPUs, teams vision and nlp
// guaranteed 4 each (the demo's), a bound of 15 s (--reserve-after), alice
// keeps a terminal session while she and bob submit 1-GPU batch jobs of
// 4 to 8 s, a third of them sharing a GPU, faster than the GPUs run them. Her 8-GPU job, submitted into
// that stream, borrows beyond vision's guarantee. It starts within the
// bound (serve's default lead reserves it at half the bound, and at the
// bound it takes its GPUs from the batch jobs on them, sharing ones too;
// before the lead it started within twice the bound); once it has a reservation, the reservation stays with it until
// it starts, on the same GPUs, its "from" never later (before issue 30's
// fix the reservation went from job to job and the 8-GPU job waited
// minutes). The session is never preempted meanwhile.
func TestBigJobReservedInStream(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	const bound = 15 * time.Second
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "2x8x80", "--reserve-after", bound.String(), "--min-runtime", "30s")
	alice := newAPI(t, srv.URL, "alice", "dev") // vision
	bob := newAPI(t, srv.URL, "bob", "dev")     // nlp
	shell := submit(t, alice, map[string]any{"name": "shell", "gpus": 1, "session": map[string]any{"type": "terminal"}})
	waitJob(t, alice, shell, 30*time.Second, "running")

	rng := rand.New(rand.NewPCG(30, 8))
	stream := func(i int) {
		who := alice
		if i%2 == 1 {
			who = bob
		}
		job := map[string]any{"name": fmt.Sprintf("batch-%d", i), "gpus": 1,
			"sim": map[string]any{"duration_s": 4 + rng.IntN(5)}}
		if i%3 == 2 {
			// A third share a GPU, as the demo's do: a GPU they hold
			// together frees when the last of them ends.
			job["sharing"], job["model"] = true, "resnet50"
			job["mem_persistent_mib"], job["mem_ephemeral_mib"] = 4096, 2048
		}
		submit(t, who, job)
	}
	// The stream first fills both machines, then the 8-GPU job joins it.
	i := 0
	for ; i < 20; i++ {
		stream(i)
	}
	big := submit(t, alice, map[string]any{"name": "big", "gpus": 8, "sim": map[string]any{"duration_s": 5}})

	var (
		j        reservationView
		seen     []string // the reservation at each poll, once it came
		gpus     []string
		from     time.Time
		problems []string
	)
	deadline := time.Now().Add(4 * bound)
	for time.Now().Before(deadline) {
		stream(i)
		i++
		if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", big), nil, &j); st != http.StatusOK {
			t.Fatalf("GET job %d: status %d", big, st)
		}
		if j.State != "queued" {
			break
		}
		switch r := j.Reservation; {
		case r != nil && gpus == nil:
			gpus, from = r.GPUs, r.From
			seen = append(seen, fmt.Sprintf("%v from %s", r.GPUs, r.From.Format("15:04:05.000")))
		case r != nil:
			if !slices.Equal(r.GPUs, gpus) {
				problems = append(problems, fmt.Sprintf("the reservation moved from GPUs %v to %v", gpus, r.GPUs))
			}
			if r.From.After(from) {
				problems = append(problems, fmt.Sprintf("its start moved later, from %s to %s", from.Format("15:04:05.000"), r.From.Format("15:04:05.000")))
			}
			gpus, from = r.GPUs, r.From
			seen = append(seen, fmt.Sprintf("%v from %s", r.GPUs, r.From.Format("15:04:05.000")))
		case gpus != nil:
			problems = append(problems, "the waiting job lost its reservation: "+j.Reason)
			seen = append(seen, "none")
		}
		if s := alice.job(shell); s.State != "running" || s.Preemptions != 0 {
			t.Fatalf("after %d batch jobs the session is %s with %d preemptions: %s", i, s.State, s.Preemptions, s.Reason)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if j.StartedAt == nil {
		t.Fatalf("the 8-GPU job has not started %v after its submission (bound %v): %s; %s; reservations seen: %s",
			time.Since(j.SubmittedAt).Round(time.Second), bound, j.State, j.Reason, strings.Join(seen, ", "))
	}
	wait := j.StartedAt.Sub(j.SubmittedAt)
	// serve's default lead (half the bound) makes the bound when it must
	// start; the pass that starts it comes within the engine's interval
	// of its deadline's recheck.
	if wait > bound+time.Second {
		t.Errorf("the 8-GPU job waited %v, more than its bound of %v; reservations seen: %s", wait.Round(time.Millisecond), bound, strings.Join(seen, ", "))
	}
	if len(problems) > 0 {
		t.Errorf("the reservation did not stay with the job:\n%s\nreservations seen: %s", strings.Join(problems, "\n"), strings.Join(seen, ", "))
	}
	if s := alice.job(shell); s.State != "running" || s.Preemptions != 0 {
		t.Errorf("the session is %s with %d preemptions: %s", s.State, s.Preemptions, s.Reason)
	}
	t.Logf("%d batch jobs; the 8-GPU job waited %v (bound %v); reservations seen at each poll: %s",
		i, wait.Round(time.Millisecond), bound, strings.Join(seen, ", "))
}

// TestReservationNamesItsSessions: an 8-GPU job reserved the one machine
// on which a terminal session runs; the session is never preempted for
// it, so its reason says which session it waits for, in the API and on
// its page as its owner and an admin see it (issue 30: the reason said only that the
// GPUs were reserved, while the session held one of them for as long as
// it ran).
func TestReservationNamesItsSessions(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x8x80", "--reserve-after", "3s")
	alice := newAPI(t, srv.URL, "alice", "dev") // vision
	bob := newAPI(t, srv.URL, "bob", "dev")     // nlp
	shell := submit(t, alice, map[string]any{"name": "shell", "gpus": 1, "session": map[string]any{"type": "terminal"}})
	waitJob(t, alice, shell, 30*time.Second, "running")
	big := submit(t, bob, map[string]any{"name": "big", "gpus": 8, "sim": map[string]any{"duration_s": 5}})
	want := fmt.Sprintf("reserved for this job; session %d holds one of them: a session is never preempted, so the job waits for it to end", shell)
	var j reservationView
	eventually(t, 30*time.Second, "the 8-GPU job's reason to name the session", func() bool {
		if st := bob.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", big), nil, &j); st != http.StatusOK {
			t.Fatalf("GET job %d: %d", big, st)
		}
		return strings.Contains(j.Reason, want)
	})
	if j.State != "queued" || j.Reservation == nil {
		t.Fatalf("job %d: %s, reservation %+v; want queued with a reservation", big, j.State, j.Reservation)
	}
	t.Logf("the API's reason: %s", j.Reason)

	for _, user := range []string{"bob", "admin"} {
		ctx, sc := screensAs(t, srv.URL, user)
		for _, vp := range viewports {
			sc.visit(t, vp, fmt.Sprintf("/jobs/%d", big), "#job-reason", "reservation-session-"+user)
			if got, err := readFirst(ctx, "#job-reason", "e.innerText"); err != nil || !strings.Contains(got, want) {
				t.Errorf("job page as %s at %s: reason %q, %v; want %q", user, vp.name, got, err, want)
			}
		}
	}
	// The session is still running: the reservation waits for it.
	if s := waitJob(t, alice, shell, time.Second, "running"); s.Preemptions != 0 {
		t.Errorf("the session was preempted %d times", s.Preemptions)
	}
}
