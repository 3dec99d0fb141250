package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// TestEngineReservation: the engine passes the core's reservation on. Two
// 1-GPU jobs hold a 4-GPU machine's GPUs 0 and 1 until their limits (10
// and 20 minutes from now); a 4-GPU job has waited 10 minutes, past a
// bound of 5; a 1-GPU job without a limit arrives. The 4-GPU job's reason
// names its GPUs and the clock time they are expected free, the 1-GPU job
// may not take the 2 free GPUs, and Reservation gives the reservation.
func TestEngineReservation(t *testing.T) {
	jobs := []Job{
		{ID: 1, GPUs: 1, SimDuration: 10000, SubmittedAt: t0.Add(-20 * time.Minute), TimeLimit: 20 * time.Minute},
		{ID: 2, GPUs: 1, SimDuration: 10000, SubmittedAt: t0.Add(-20 * time.Minute), TimeLimit: 30 * time.Minute},
		{ID: 3, GPUs: 4, SimDuration: 100, SubmittedAt: t0.Add(-10 * time.Minute)},
		{ID: 4, GPUs: 1, SimDuration: 100, SubmittedAt: t0},
	}
	mem := newMemStore(jobs[:2]...)
	n := newFakeNode("n0", 4)
	e, clock := newTestEngine(t, mem, n)
	sc, err := sched.New(sched.Config{Policy: "fjf", ReserveAfterS: 300})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	// Jobs 1 and 2 started 10 minutes ago, on GPUs 0 and 1.
	clock.t = t0.Add(-10 * time.Minute)
	mustPass(t, e)
	if mem.state(1) != job.Running || mem.state(2) != job.Running {
		t.Fatalf("jobs 1 and 2 are %s and %s, want running", mem.state(1), mem.state(2))
	}
	mem.mu.Lock()
	for _, j := range jobs[2:] {
		j.State = job.Queued
		mem.jobs[j.ID] = &j
	}
	mem.mu.Unlock()
	clock.t = t0
	mustPass(t, e)
	if mem.state(3) != job.Queued || mem.state(4) != job.Queued {
		t.Fatalf("jobs 3 and 4 are %s and %s, want both waiting", mem.state(3), mem.state(4))
	}
	r, from, ok := e.Reservation(3)
	if !ok || r.Count != 4 || len(r.GPUs) != 4 || !from.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("reservation %+v from %v, %v; want 4 GPUs of n0 from %v", r, from, ok, t0.Add(20*time.Minute))
	}
	// The reason names the GPUs; when the job starts is its forecast's
	// to say, not the reservation's estimate.
	want := "GPUs n0:0-3 reserved for this job"
	if got := e.Waits()[3].Reason; !strings.Contains(got, want) || strings.Contains(got, "expected free") || strings.Contains(got, want+" from") {
		t.Errorf("job 3 waits %q, want it to say %q and no time", got, want)
	}
	if got := e.Waits()[4].Reason; !strings.Contains(got, "2 free GPUs held for job 3's reservation") {
		t.Errorf("job 4 waits %q", got)
	}
	if _, _, ok := e.Reservation(4); ok {
		t.Error("job 4 holds a reservation")
	}
}

// TestEngineReservationPreemptsAcrossTeams: under fair share, a job
// reserved once it waited its bound preempts the backfills on its GPUs,
// of another team too, and that is no reclaim: the preempted job's wait
// and its stop reason name the reserved job and its reservation, and the
// engine counts a preemption, not a reclaim. Teams vision and nlp are
// guaranteed 2 GPUs each of a 4-GPU machine; vision's 4-GPU job 3 has
// waited 20 minutes, past a bound of 5, so it borrows and is reserved
// at its rank; jobs 1 (nlp) and 2 (vision) started 5 minutes ago, after
// it was due, having waited a minute: backfills, which it preempts.
func TestEngineReservationPreemptsAcrossTeams(t *testing.T) {
	started := t0.Add(-5 * time.Minute)
	running := func(id int64, team string, idx int) Job {
		return Job{ID: id, Team: team, GPUs: 1, SimDuration: 10000, State: job.Running,
			Placement: []gpu.Ref{{Node: "n0", Index: idx}}, LastStartAt: &started,
			SubmittedAt: started.Add(-time.Minute + time.Duration(id)*time.Second)}
	}
	mem := newMemStore(running(1, "nlp", 0), running(2, "vision", 1),
		Job{ID: 3, Team: "vision", GPUs: 4, SimDuration: 100, SubmittedAt: t0.Add(-20 * time.Minute)})
	store := &teamStore{memStore: mem, teams: []Team{{Name: "vision", GuaranteeGPUs: 2}, {Name: "nlp", GuaranteeGPUs: 2}}}
	n := newFakeNode("n0", 4)
	n.running[1], n.running[2] = 1, 1
	e, clock := newTestEngine(t, mem, n)
	e.cfg.Store = store
	sc, err := sched.New(sched.Config{Policy: "tiresias-l", ReserveAfterS: 300})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	mustPass(t, e)
	if len(n.stops) != 2 {
		t.Fatalf("stops = %v; want jobs 1 and 2 preempted for job 3's reservation", n.stops)
	}
	if got := e.Waits()[1].Reason; !strings.HasPrefix(got, "preempted for job 3, whose reservation of its GPUs came due") {
		t.Errorf("job 1 (nlp) waits %q, want it preempted for job 3's reservation", got)
	}
	st := e.Stats()
	if st.Reclaims != 0 || st.Preempted[CauseTeam{Cause: PreemptPriority, Team: "nlp"}] != 1 {
		t.Errorf("reclaims %d, preempted %v; want nlp's job preempted, no reclaim", st.Reclaims, st.Preempted)
	}
	for _, id := range n.stops {
		delete(n.running, id)
		e.testExit(context.Background(), exit("n0", id, -1, clock.t))
	}
	const why = "preempted for job 3, which had its GPUs reserved once it waited past its bound"
	if mem.state(1) != job.Preempted || !strings.HasPrefix(mem.reason[1], why) {
		t.Errorf("job 1 is %s, stopped with %q; want preempted, stopped with %q", mem.state(1), mem.reason[1], why+"...")
	}
	clock.t = clock.t.Add(time.Second)
	mustPass(t, e)
	if mem.state(3) != job.Running {
		t.Errorf("job 3 is %s, want running on the GPUs of its reservation", mem.state(3))
	}
}

// TestEngineKeepsReservation: the engine hands each pass's reservations
// to the next (sched.Snapshot.Reservations), so a reservation stays with
// its job: when job 2's limit is raised, so that GPU 1 is expected free
// later, job 3's reservation keeps its time; passed afresh, it would move
// to job 2's new end.
func TestEngineKeepsReservation(t *testing.T) {
	jobs := []Job{
		{ID: 1, GPUs: 1, SimDuration: 10000, SubmittedAt: t0.Add(-20 * time.Minute), TimeLimit: 20 * time.Minute},
		{ID: 2, GPUs: 1, SimDuration: 10000, SubmittedAt: t0.Add(-20 * time.Minute), TimeLimit: 30 * time.Minute},
		{ID: 3, GPUs: 4, SimDuration: 100, SubmittedAt: t0.Add(-10 * time.Minute)},
	}
	mem := newMemStore(jobs[:2]...)
	n := newFakeNode("n0", 4)
	e, clock := newTestEngine(t, mem, n)
	sc, err := sched.New(sched.Config{Policy: "fjf", ReserveAfterS: 300})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	clock.t = t0.Add(-10 * time.Minute)
	mustPass(t, e)
	mem.mu.Lock()
	j3 := jobs[2]
	j3.State = job.Queued
	mem.jobs[3] = &j3
	mem.mu.Unlock()
	clock.t = t0
	mustPass(t, e)
	if _, from, ok := e.Reservation(3); !ok || !from.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("first reservation from %v, %v; want from %v", from, ok, t0.Add(20*time.Minute))
	}
	mem.mu.Lock()
	mem.jobs[2].TimeLimit = 40 * time.Minute
	mem.mu.Unlock()
	clock.t = t0.Add(time.Minute)
	mustPass(t, e)
	r, from, ok := e.Reservation(3)
	if !ok || len(r.GPUs) != 4 || !from.Equal(t0.Add(20*time.Minute)) {
		t.Errorf("reservation %+v from %v, %v after job 2's limit was raised; want it kept, from %v", r, from, ok, t0.Add(20*time.Minute))
	}

	// A restarted server (or a new leader) reads it back from the store
	// and keeps it: the same GPUs, from the same time, due at the same
	// time. Made afresh it would start at job 2's new end.
	if got := mem.reservations(); len(got) != 1 || got[0].JobID != 3 {
		t.Fatalf("stored reservations %+v; want job 3's", got)
	}
	n2 := newFakeNode("n0", 4)
	n2.running[1], n2.running[2] = 1, 1
	e2, clock2 := newTestEngine(t, mem, n2)
	e2.cfg.Scheduler = sc
	clock2.t = t0.Add(2 * time.Minute)
	if err := e2.loadReservations(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustPass(t, e2)
	r2, from2, ok := e2.Reservation(3)
	if !ok || !slices.Equal(r2.GPUs, r.GPUs) || !from2.Equal(from) || r2.DueS != r.DueS {
		t.Errorf("after a restart, reservation %+v from %v, %v; want %+v from %v", r2, from2, ok, r, from)
	}
}

// rsvMem is a memStore's reservations (ReservationStore).
type rsvMem struct {
	rsvMu sync.Mutex
	rsv   []sched.Reservation
}

func (m *rsvMem) Reservations(context.Context) ([]sched.Reservation, error) {
	m.rsvMu.Lock()
	defer m.rsvMu.Unlock()
	return slices.Clone(m.rsv), nil
}

func (m *rsvMem) SetReservations(_ context.Context, rs []sched.Reservation, _ time.Time) error {
	m.rsvMu.Lock()
	defer m.rsvMu.Unlock()
	m.rsv = slices.Clone(rs)
	return nil
}

// reservations is what the store holds.
func (m *rsvMem) reservations() []sched.Reservation {
	rs, _ := m.Reservations(context.Background())
	return rs
}
