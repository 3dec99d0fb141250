package sched

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// bytesReader hands out the fuzzer's bytes, then zeros.
type bytesReader struct {
	b []byte
}

func (r *bytesReader) next() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// float decodes a time or a service, now and then a hostile one.
func (r *bytesReader) float() float64 {
	switch b := r.next(); b {
	case 250:
		return math.NaN()
	case 251:
		return math.Inf(1)
	case 252:
		return math.Inf(-1)
	case 253:
		return -5
	case 254:
		return 1e300
	default:
		return float64(b) * 100
	}
}

// decodeSnapshot turns arbitrary bytes into a configuration and a
// snapshot: any policy and mode, odd nodes (empty, duplicate names and
// GPU indices, unschedulable), odd jobs (no or negative GPUs, unknown
// states, stale queue states, placements on GPUs that do not exist or
// that another job holds, NaN and infinite times), and now and then
// repeated job IDs, which callers must not send (uniqueIDs says).
func decodeSnapshot(data []byte) (Config, Snapshot) {
	r := &bytesReader{b: data}
	var cfg Config
	cfg.Policy = Policies()[int(r.next())%len(Policies())]
	flags := r.next()
	if flags&1 != 0 {
		cfg.Placement = PlaceCount
	}
	cfg.OmitWaits = flags&2 != 0
	cfg.NoPreemption = flags&4 != 0
	if flags&8 != 0 {
		cfg.PromoteKnob = float64(1 + r.next()%4)
	}
	if flags&16 != 0 {
		cfg.LocalityWaitS = float64(r.next()) - 10
	}
	if flags&32 != 0 {
		cfg.Thresholds = []float64{float64(1 + r.next())}
	}
	dupIDs := flags&64 != 0
	if flags&128 != 0 {
		cfg.SharePlacement = ShareFullestFirst
	}

	s := Snapshot{Now: r.float()}
	nn := 1 + int(r.next()%6)
	names := make([]string, nn)
	for i := range names {
		b := r.next()
		names[i] = "n" + strconv.Itoa(i)
		if b&1 != 0 && i > 0 {
			names[i] = names[i-1] // a duplicate name
		}
		n := Node{Name: names[i], Unschedulable: b&2 != 0}
		for k := range int(b>>2) % 9 {
			idx := k
			if b&0x80 != 0 {
				idx = int(r.next() % 6) // maybe a duplicate index
			}
			n.GPUs = append(n.GPUs, GPU{Index: idx})
		}
		s.Nodes = append(s.Nodes, n)
	}
	nj := int(r.next() % 24)
	for i := range nj {
		j := Job{ID: int64(i + 1)}
		if dupIDs {
			j.ID = int64(i%3 + 1)
		}
		j.GPUs = int(int8(r.next())) % 10
		j.State = State(r.next() % 3)
		j.SubmitTime = r.float()
		j.ExecutedS = r.float()
		j.AttainedService = r.float()
		j.DurationS = r.float()
		j.Model = genModels[int(r.next())%len(genModels)]
		j.Skew = float64(r.next()) / 200
		q := r.next()
		j.Queue.Index = int(q%5) - 1
		if q&0x80 != 0 {
			j.Queue.Since = r.float()
			j.Queue.CycleStart = r.float()
			j.Queue.CycleService = r.float()
			j.Queue.CycleExecuted = r.float()
		}
		if j.holds() { // State(2) is Leaving
			for range int(r.next() % 10) {
				b := r.next()
				name := "ghost"
				if b%8 < byte(nn) {
					name = names[b%8]
				}
				j.Placement = append(j.Placement, gpu.Ref{Node: name, Index: int(b>>3)%10 - 1})
			}
		}
		s.Jobs = append(s.Jobs, j)
	}
	if r.next()&1 != 0 {
		s.GPUTimeDist = NewGPUTimeDist([]float64{r.float(), r.float(), r.float()})
	}
	// Teams, last, so that inputs written before teams decode as before:
	// duplicate names, odd guarantees, weights, usages and caps, and jobs
	// of teams the snapshot does not list.
	if nt := int(r.next() % 5); nt > 0 {
		if b := r.next(); b&1 != 0 {
			cfg.MinRuntimeS = float64(b) - 128
		}
		for i := range nt {
			b := r.next()
			t := Team{Name: "t" + strconv.Itoa(i), GuaranteeGPUs: int(int8(r.next())) % 12}
			if b&1 != 0 && i > 0 {
				t.Name = "t" + strconv.Itoa(i-1)
			}
			if b&2 != 0 {
				t.Weight = r.float()
			}
			if b&4 != 0 {
				t.UsageGPUSeconds = r.float()
			}
			if b&8 != 0 {
				t.MaxGPUsPerUser = int(r.next() % 6)
			}
			if b&16 != 0 {
				t.UserCaps = map[string]int{"u0": int(int8(r.next())) % 6}
			}
			s.Teams = append(s.Teams, t)
		}
		for i := range s.Jobs {
			j := &s.Jobs[i]
			b := r.next()
			j.Team = "t" + strconv.Itoa(int(b%byte(nt+1)))
			j.User = "u" + strconv.Itoa(int(b>>4)%3)
			j.LastStartTime = r.float()
		}
	}
	// Sharing, after teams for the same reason: GPU memory, and jobs that
	// share with any estimate, negative and huge ones included.
	if r.next()&1 != 0 {
		for i := range s.Nodes {
			for k := range s.Nodes[i].GPUs {
				s.Nodes[i].GPUs[k].MemMiB = int64(r.next()) * 128
			}
		}
		for i := range s.Jobs {
			j := &s.Jobs[i]
			b := r.next()
			j.Sharing = b&1 != 0
			j.MemPersistentMiB, j.MemEphemeralMiB = int64(r.next())*64, int64(r.next())*64
			if b&2 != 0 {
				j.MemPersistentMiB = -j.MemPersistentMiB
			}
			if b&4 != 0 {
				j.MemEphemeralMiB = 1 << 62
			}
		}
	}
	// Classes, after sharing for the same reason: sessions, and a class
	// no caller names.
	if r.next()&1 != 0 {
		for i := range s.Jobs {
			s.Jobs[i].Class = Class(r.next() % 5)
		}
	}
	// Reservations, last again: a bound for the server and for teams,
	// time limits of any value, interactive sessions.
	if b := r.next(); b&1 != 0 {
		cfg.ReserveAfterS = float64(b>>1) * 50
		cfg.MaxReservations = int(r.next() % 4)
		for i := range s.Teams {
			s.Teams[i].ReserveAfterS = r.float() - 1000
		}
		for i := range s.Jobs {
			j := &s.Jobs[i]
			k := r.next()
			if k&1 != 0 {
				j.TimeLimitS = r.float()
			}
			j.Interactive = k&2 != 0
		}
	}
	// Kept reservations (Snapshot.Reservations), last: of jobs that
	// exist or not, on GPUs that exist or not, any count and time.
	if b := r.next(); b&1 != 0 {
		for range int(b>>1) % 4 {
			var rv Reservation
			if len(s.Jobs) > 0 {
				rv.JobID = s.Jobs[int(r.next())%len(s.Jobs)].ID
			}
			rv.Count = int(r.next() % 10)
			for range int(r.next() % 10) {
				if len(s.Nodes) == 0 {
					break
				}
				rv.GPUs = append(rv.GPUs, gpu.Ref{Node: s.Nodes[int(r.next())%len(s.Nodes)].Name, Index: int(r.next()%10) - 1})
			}
			rv.FromS, rv.DueS = r.float(), r.float()
			s.Reservations = append(s.Reservations, rv)
		}
	}
	// A lead (Config.ReserveLeadS), last of all: half the bound, or 0
	// to 950 s.
	if b := r.next(); b&1 != 0 {
		if cfg.ReserveLeadS = float64((b>>2)%20) * 50; b&2 != 0 {
			cfg.ReserveLeadS = LeadHalfBound
		}
	}
	return cfg, s
}

// FuzzSchedule feeds arbitrary snapshots to every policy: a pass must not
// panic, must keep the invariants (see checkDecisions) and must give the
// same decisions twice.
func FuzzSchedule(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 0, 10, 3, 0x22, 0x22, 0x22, 8, 4, 1, 1, 0, 0, 0, 0, 0, 0, 2, 9, 17, 25})
	f.Add([]byte{6, 9, 2, 50, 4, 0xa3, 1, 2, 3, 4, 5, 6, 7, 8, 20, 250, 251, 252, 253, 254, 1, 1, 0x80})
	f.Add([]byte{0, 1, 0, 2, 0x20, 0x21, 6, 3, 1, 10, 10, 10, 10, 3, 100, 4, 3, 0, 8, 16, 24})
	f.Add([]byte{5, 64, 10, 2, 0x22, 0x22, 9, 4, 1, 1, 0, 0, 0, 0, 0, 0, 2, 9, 4, 1, 1, 5, 5, 5, 5, 0, 0, 0})
	// With teams: two nodes of 8, jobs of two teams and an unlisted one.
	f.Add([]byte{6, 0, 30, 2, 0x20, 0x20, 6,
		8, 1, 10, 10, 10, 10, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
		4, 0, 20, 0, 0, 0, 0, 0, 0,
		8, 1, 10, 10, 10, 10, 0, 0, 9, 10, 11, 12, 13, 14, 15, 16,
		2, 0, 20, 0, 0, 0, 0, 0, 0,
		1, 0, 20, 0, 0, 0, 0, 0, 0,
		4, 0, 20, 0, 0, 0, 0, 0, 0,
		0, 3, 0, 0, 8, 4, 8, 0, 0, 16, 1, 0, 17, 2, 0, 18, 0, 0, 17, 1, 0, 18, 2, 0})
	// With sessions: tiresias-l with a threshold of 2 GPU-s, one node of
	// 2 GPUs held by a session far past it, a batch job waiting; no
	// teams, no sharing.
	f.Add([]byte{5, 32, 1, 10, 0, 8, 2,
		2, 1, 1, 100, 100, 0, 0, 0, 2, 8, 16,
		2, 0, 5, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 1, 1, 0})
	// With sharing: one node of 2 GPUs, a running sharing job, two
	// pending ones and a whole one; no teams.
	f.Add([]byte{1, 0, 10, 0, 8, 4,
		1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 8,
		1, 0, 20, 0, 0, 0, 0, 0, 1,
		1, 0, 30, 0, 0, 0, 0, 0, 1,
		1, 0, 40, 0, 0, 0, 0, 0, 1,
		0, 0, 1,
		128, 128, 1, 20, 60, 1, 10, 40, 1, 10, 30, 0, 0, 0})
	// With a reservation: one node of 8, five 1-GPU jobs running, an
	// 8-GPU job and two 1-GPU jobs waiting, a bound of 50 s.
	f.Add([]byte{5, 0, 100, 0, 0x20,
		1, 1, 0, 0, 0, 0, 0, 0, 1, 0,
		1, 1, 0, 0, 0, 0, 0, 0, 1, 8,
		1, 1, 0, 0, 0, 0, 0, 0, 1, 16,
		1, 1, 0, 0, 0, 0, 0, 0, 1, 24,
		1, 1, 0, 0, 0, 0, 0, 0, 1, 32,
		8, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 0, 90, 0, 0, 0, 0, 0, 0,
		1, 0, 95, 0, 0, 0, 0, 0, 0,
		0, 0, 0, 0, 3, 1, 1, 5, 1, 10, 1, 20, 1, 30, 1, 40, 0, 2, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, s := decodeSnapshot(data)
		sc, err := New(cfg)
		if err != nil {
			return
		}
		d := sc.Schedule(s)
		if p, _ := checkDecisions(s, cfg, d); len(p) > 0 && uniqueIDs(s) {
			t.Fatalf("%+v\n%s", cfg, joinProblems(p))
		}
		if len(s.Teams) > 0 && uniqueIDs(s) {
			if p := fairProblems(sc, s, cfg, d); len(p) > 0 {
				t.Fatalf("%+v\n%s", cfg, joinProblems(p))
			}
		}
		if p := shareProblems(s, d); len(p) > 0 && uniqueIDs(s) {
			t.Fatalf("%+v\n%s", cfg, joinProblems(p))
		}
		if p := internalProblems(sc, s); p != "" {
			t.Fatalf("%+v: %s", cfg, p)
		}
		if p := sessionProblems(sc, s, d); len(p) > 0 && uniqueIDs(s) {
			t.Fatalf("%+v\n%s", cfg, joinProblems(p))
		}
		if p := reservationProblems(sc, s); len(p) > 0 && uniqueIDs(s) {
			t.Fatalf("%+v\n%s", cfg, joinProblems(p))
		}
		// The next pass, given this one's reservations to keep.
		next := s
		next.Reservations = d.Reservations
		dn := sc.Schedule(next)
		if p, _ := checkDecisions(next, cfg, dn); len(p) > 0 && uniqueIDs(next) {
			t.Fatalf("%+v, reservations kept\n%s", cfg, joinProblems(p))
		}
		if p := reservationProblems(sc, next); len(p) > 0 && uniqueIDs(next) {
			t.Fatalf("%+v, reservations kept\n%s", cfg, joinProblems(p))
		}
		if p := internalProblems(sc, next); p != "" {
			t.Fatalf("%+v, reservations kept: %s", cfg, p)
		}
		// Compared as text, where NaN equals NaN.
		if again := sc.Schedule(s); fmt.Sprintf("%+v", d) != fmt.Sprintf("%+v", again) {
			t.Fatalf("two passes over the same snapshot differ")
		}
		// Without the reasons (Config.OmitReasons, as the simulator
		// runs), the same decisions, and no reasons.
		quiet := cfg
		quiet.OmitReasons = true
		if qsc, err := New(quiet); err != nil {
			t.Fatalf("%+v: %v", quiet, err)
		} else if got, want := fmt.Sprintf("%+v", qsc.Schedule(s)), fmt.Sprintf("%+v", withoutReasons(sc.Schedule(s))); got != want {
			t.Fatalf("%+v: with OmitReasons\n%s\nwant\n%s", cfg, got, want)
		}
		// Decisions built in the last pass's slices
		// (Config.ReuseDecisions, as the simulator runs): the same, and
		// again after a pass over another snapshot.
		reuse := cfg
		reuse.ReuseDecisions = true
		if rsc, err := New(reuse); err != nil {
			t.Fatalf("%+v: %v", reuse, err)
		} else {
			if got := fmt.Sprintf("%+v", rsc.Schedule(s)); got != fmt.Sprintf("%+v", d) {
				t.Fatalf("%+v: with ReuseDecisions\n%s\nwant\n%+v", cfg, got, d)
			}
			if len(data) > 1 {
				_, other := decodeSnapshot(append(slices.Clone(data[1:]), data[0]))
				rsc.Schedule(other)
			}
			if got := fmt.Sprintf("%+v", rsc.Schedule(s)); got != fmt.Sprintf("%+v", d) {
				t.Fatalf("%+v: with ReuseDecisions, a second time\n%s\nwant\n%+v", cfg, got, d)
			}
		}
		// With the running jobs' GPUs kept from pass to pass
		// (Config.StablePlacements, as the simulator runs): the same
		// decisions on s, on s again (every placement known), on the
		// snapshot the decisions lead to (stableNext: some jobs gone,
		// some started, the others' placements the same slices), and on
		// s after another snapshot.
		stable := cfg
		stable.StablePlacements = true
		if ssc, err := New(stable); err != nil {
			t.Fatalf("%+v: %v", stable, err)
		} else {
			for k := range 2 {
				if got := fmt.Sprintf("%+v", ssc.Schedule(s)); got != fmt.Sprintf("%+v", d) {
					t.Fatalf("%+v: with StablePlacements, pass %d\n%s\nwant\n%+v", cfg, k+1, got, d)
				}
			}
			next := stableNext(s, d)
			want := fmt.Sprintf("%+v", sc.Schedule(next))
			if got := fmt.Sprintf("%+v", ssc.Schedule(next)); got != want {
				t.Fatalf("%+v: with StablePlacements, the next snapshot\n%s\nwant\n%s", cfg, got, want)
			}
			if got := fmt.Sprintf("%+v", ssc.Schedule(next)); got != want {
				t.Fatalf("%+v: with StablePlacements, the next snapshot again\n%s\nwant\n%s", cfg, got, want)
			}
			if len(data) > 1 {
				_, other := decodeSnapshot(append(slices.Clone(data[1:]), data[0]))
				ssc.Schedule(other)
			}
			if got := fmt.Sprintf("%+v", ssc.Schedule(s)); got != fmt.Sprintf("%+v", d) {
				t.Fatalf("%+v: with StablePlacements, after other snapshots\n%s\nwant\n%+v", cfg, got, d)
			}
		}
		// What a pass keeps for the next (node names, model lookups)
		// changes nothing: after another snapshot, the same decisions.
		if len(data) > 1 {
			_, other := decodeSnapshot(append(slices.Clone(data[1:]), data[0]))
			sc.Schedule(other)
			if again := sc.Schedule(s); fmt.Sprintf("%+v", d) != fmt.Sprintf("%+v", again) {
				t.Fatalf("a pass over the same snapshot differs after another snapshot")
			}
		}
	})
}

// withoutReasons is d with the reasons of its preemptions and queue
// changes left empty, in copies of those lists.
func withoutReasons(d Decisions) Decisions {
	d.Preempts, d.QueueChanges = slices.Clone(d.Preempts), slices.Clone(d.QueueChanges)
	for i := range d.Preempts {
		d.Preempts[i].Reason = ""
	}
	for i := range d.QueueChanges {
		d.QueueChanges[i].Reason = ""
	}
	return d
}

func uniqueIDs(s Snapshot) bool {
	seen := map[int64]bool{}
	for _, j := range s.Jobs {
		if seen[j.ID] {
			return false
		}
		seen[j.ID] = true
	}
	return true
}

// internalProblems runs a pass by hand and checks the pass's own books:
// free counts agree with busy flags, nothing reclaimable is negative.
func internalProblems(sc *Scheduler, s Snapshot) string {
	p := new(pass)
	p.run(sc, &s)
	if p.cl.reclTotal < 0 {
		return fmt.Sprintf("reclaimable GPUs %d < 0", p.cl.reclTotal)
	}
	if p.count {
		return ""
	}
	total := 0
	for i, n := range p.cl.nodes {
		if !n.sched {
			continue
		}
		free := 0
		for k := range int(n.n) {
			if !p.cl.busy[int(n.first)+k] {
				free++
			}
		}
		if int(n.free) != free {
			return fmt.Sprintf("node %d counts %d free GPUs, has %d", i, n.free, free)
		}
		if p.cl.recl[i] < 0 {
			return fmt.Sprintf("node %d: reclaimable %d < 0", i, p.cl.recl[i])
		}
		total += free
	}
	if total != p.cl.free {
		return fmt.Sprintf("cluster counts %d free GPUs, has %d", p.cl.free, total)
	}
	return ""
}

// stableNext is the snapshot a caller under Config.StablePlacements
// gives after applying d to s, as the simulator does: preempted jobs
// wait again without a placement, started ones run on new slices of the
// GPUs they were given, the first running job that stays so has ended
// (it leaves the snapshot), and every other running job keeps its
// Placement, the very slice.
func stableNext(s Snapshot, d Decisions) Snapshot {
	jobs := slices.Clone(s.Jobs)
	find := func(id int64, st State) *Job {
		for i := range jobs {
			if jobs[i].ID == id && jobs[i].State == st {
				return &jobs[i]
			}
		}
		return nil
	}
	for _, p := range d.Preempts {
		if j := find(p.JobID, Running); j != nil {
			j.State, j.Placement = Pending, nil
		}
	}
	var started []*Job
	for _, st := range d.Starts {
		if j := find(st.JobID, Pending); j != nil {
			started = append(started, j)
			j.Placement = slices.Clone(st.GPUs)
		}
	}
	for _, j := range started {
		j.State = Running // after the finds: a started job is not found as pending twice
	}
	for i := range jobs {
		if jobs[i].State == Running && !slices.Contains(started, &jobs[i]) {
			jobs = slices.Delete(jobs, i, i+1)
			break
		}
	}
	s.Jobs = jobs
	return s
}
