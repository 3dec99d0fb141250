package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// limit sets a job's declared time limit.
func limit(s float64) func(*Job) { return func(j *Job) { j.TimeLimitS = s } }

// ranFrom sets a running job's last start and what it has run since then.
func ranFrom(start, now float64) func(*Job) {
	return func(j *Job) {
		j.LastStartTime = start
		j.ExecutedS = now - start
		j.AttainedService = j.ExecutedS * float64(j.GPUs)
	}
}

// session makes a job an interactive session.
func session(j *Job) { j.Interactive = true }

// oneNodeBusy is the cluster at t=1000: one node of 8 GPUs, 5 of
// them held by 1-GPU jobs that started at 100 and end by their limits at
// 1,200 to 1,600, job 10 asking for all 8 since 0, and more 1-GPU jobs
// arriving. With a bound of 300 s job 10 is past its deadline (600)
// under a preemptive policy: beforeDeadline moves its submission to 500.
func oneNodeBusy(pending ...Job) Snapshot {
	const now = 1000
	s := Snapshot{Now: now, Nodes: nodes(8)}
	for i := range 5 {
		end := 1200 + 100*float64(i)
		s.Jobs = append(s.Jobs, run(int64(i+1), 100, on("node-0", i), ranFrom(100, now), limit(end-100)))
	}
	s.Jobs = append(s.Jobs, pend(10, 8, 0))
	s.Jobs = append(s.Jobs, pending...)
	return s
}

// beforeDeadline makes oneNodeBusy's job 10 submitted at 500: due at
// 800 with a bound of 300 s, its deadline (1,100) not reached at 1,000.
func beforeDeadline(s Snapshot) Snapshot {
	for i := range s.Jobs {
		if s.Jobs[i].ID == 10 {
			s.Jobs[i].SubmitTime = 500
		}
	}
	return s
}

func TestReservation(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		snap   Snapshot
		starts []int64
		// preempts, reservations (job: GPUs and from), and wait reasons
		// by job (a substring each)
		preempts []int64
		rsv      []Reservation
		waits    map[int64]string
		recheck  float64
	}{
		{
			name:   "off: the 1-GPU jobs take the free GPUs",
			cfg:    Config{Policy: "fjf"},
			snap:   oneNodeBusy(pend(11, 1, 900), pend(12, 1, 950, limit(100))),
			starts: []int64{11, 12},
		},
		{
			name: "under its bound: no reservation yet, a recheck when it is due",
			cfg:  Config{Policy: "fjf", ReserveAfterS: 1500},
			snap: oneNodeBusy(pend(11, 1, 900)),
			// job 10 waited 1,000 s of 1,500
			starts:  []int64{11},
			recheck: 1500,
		},
		{
			name: "fjf: the node is reserved until its last job's limit; only a job that ends before then backfills",
			cfg:  Config{Policy: "fjf", ReserveAfterS: 300},
			snap: oneNodeBusy(pend(11, 1, 900), pend(12, 1, 950, limit(100)), pend(13, 1, 960, limit(700))),
			// 12 ends at 1,100, before 1,600; 13 at 1,700, after
			starts: []int64{12},
			rsv:    []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1600, DueS: 300}},
			waits: map[int64]string{
				10: "needs 8 GPUs; 3 free; GPUs node-0:0-7 reserved for it, expected free in 600 s; first in line",
				11: "needs 1 GPU; 0 free; 3 free GPUs held for job 10's reservation; 1 job ahead in line",
				13: "needs 1 GPU; 0 free; 2 free GPUs held for job 10's reservation; 2 jobs ahead in line",
			},
			recheck: 1600,
		},
		{
			name: "tiresias-l: a later job backfills, preemptible",
			cfg:  Config{Policy: "tiresias-l", ReserveAfterS: 300},
			snap: beforeDeadline(oneNodeBusy(pend(11, 1, 900), pend(12, 1, 950))),
			// both rank below job 10 as waiting jobs (queue 0, later)
			starts: []int64{11, 12},
			rsv:    []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1100, DueS: 800}},
			waits:  map[int64]string{10: "GPUs node-0:0-7 reserved for it, expected free in 100 s; first in queue 0"},
		},
		{
			name: "tiresias-l: once the jobs from before are gone, the reserved job preempts the backfills and starts",
			cfg:  Config{Policy: "tiresias-l", ReserveAfterS: 300},
			snap: Snapshot{Now: 2000, Nodes: nodes(8), Jobs: []Job{
				pend(10, 8, 0),
				run(11, 900, on("node-0", 0), ranFrom(1000, 2000)),
				run(12, 950, on("node-0", 5), ranFrom(1000, 2000)),
				run(13, 960, on("node-0", 6, 7), ranFrom(1900, 2000)),
			}},
			starts:   []int64{10},
			preempts: []int64{11, 12, 13},
		},
		{
			name: "tiresias-l: a job that started before the reservation was due is waited for",
			cfg:  Config{Policy: "tiresias-l", ReserveAfterS: 300},
			snap: Snapshot{Now: 2000, Nodes: nodes(8), Jobs: []Job{
				pend(10, 8, 1500),
				run(11, 100, on("node-0", 0), ranFrom(200, 2000), limit(2000)),
				run(12, 1600, on("node-0", 5), ranFrom(1900, 2000)),
			}},
			// due at 1,800, its deadline 2,100; 11 started at 200,
			// before 1,800, and its limit ends it at 2,200; 12 is a
			// backfill. Both are taken at the deadline, so the GPUs
			// are expected free then, not at 11's end
			rsv: []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 2100, DueS: 1800}},
		},
		{
			name: "tiresias-l: past its deadline it takes its GPUs from any batch job, from before it was due or ranked above it",
			cfg:  Config{Policy: "tiresias-l", ReserveAfterS: 300},
			snap: Snapshot{Now: 2000, Nodes: nodes(8), Jobs: []Job{
				pend(10, 8, 100),
				run(11, 50, on("node-0", 0), ranFrom(1000, 2000), limit(1500)), // ranked above it
				run(12, 100, on("node-0", 1), ranFrom(200, 2000), limit(2000)), // from before 400
			}},
			// due at 400, its deadline 700
			starts:   []int64{10},
			preempts: []int64{11, 12},
		},
		{
			name: "tiresias-l: past its deadline, a session, and a job due itself when it started, are waited for",
			cfg:  Config{Policy: "tiresias-l", ReserveAfterS: 300},
			snap: Snapshot{Now: 2000, Nodes: nodes(8), Jobs: []Job{
				pend(10, 8, 100),
				run(11, 50, on("node-0", 0), ranFrom(1000, 2000), session, limit(1500)),
				run(12, 60, on("node-0", 1, 2), ranFrom(1500, 2000), limit(600)), // waited 1,440 s
			}},
			rsv: []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 2500, DueS: 400}},
		},
		{
			name: "tiresias-l: an interactive session on the GPUs is waited for, never preempted",
			cfg:  Config{Policy: "tiresias-l", ReserveAfterS: 300},
			snap: Snapshot{Now: 2000, Nodes: nodes(8), Jobs: []Job{
				pend(10, 8, 0),
				run(11, 900, on("node-0", 0), ranFrom(1000, 2000), session, limit(1500)),
			}},
			rsv: []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 2500, DueS: 300}},
		},
		{
			name: "fjf: an interactive session is held back until it has waited its own bound",
			cfg:  Config{Policy: "fjf", ReserveAfterS: 300},
			snap: oneNodeBusy(pend(11, 1, 900), pend(12, 1, 950, session)),
			// 12 has no limit and has waited 50 s: it would hold the
			// GPU for as long as it likes, never preempted
			starts: nil,
			rsv:    []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1600, DueS: 300}},
		},
		{
			name: "fjf: an interactive session that has waited its bound is not held back, and the reservation waits for it",
			cfg:  Config{Policy: "fjf", ReserveAfterS: 300},
			snap: oneNodeBusy(pend(11, 1, 900), pend(12, 1, 650, session)),
			// 12 has no limit, yet starts on a reserved GPU
			starts: []int64{12},
			rsv:    []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1600, DueS: 300}},
		},
		{
			name: "fjf: a session whose time limit ends it before the reservation's start backfills",
			cfg:  Config{Policy: "fjf", ReserveAfterS: 300},
			snap: oneNodeBusy(pend(11, 1, 900), pend(12, 1, 950, session, limit(500))),
			// 12 ends by 1,500, before 1,600
			starts: []int64{12},
			rsv:    []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1600, DueS: 300}},
		},
		{
			name: "tiresias-l: a session whose time limit ends it after the reservation's start is held back, though it has waited its bound",
			cfg:  Config{Policy: "tiresias-l", ReserveAfterS: 300},
			snap: beforeDeadline(oneNodeBusy(pend(12, 1, 650, session, limit(3600)))),
			// 12 would hold the GPU to 4,600, never preempted: it waits
			// for job 10 to start (issue 30)
			starts: nil,
			rsv:    []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1100, DueS: 800}},
		},
		{
			name: "tiresias-l: a session whose time limit ends it before the batch jobs' ends but after the reservation's deadline is held back",
			cfg:  Config{Policy: "tiresias-l", ReserveAfterS: 300},
			snap: beforeDeadline(oneNodeBusy(pend(12, 1, 950, session, limit(500)))),
			// 12 would end at 1,500, before the batch jobs' 1,600 but
			// after job 10's deadline, 1,100: job 10 takes its GPUs
			// then from the batch jobs (so they are expected free
			// then), and would wait for the session (issue 30)
			starts: nil,
			rsv:    []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1100, DueS: 800}},
		},
		{
			name: "tiresias-l: a job ranked above it as a waiting job is waited for, before its deadline",
			cfg:  Config{Policy: "tiresias-l", ReserveAfterS: 300},
			snap: Snapshot{Now: 2000, Nodes: nodes(8), Jobs: []Job{
				pend(10, 8, 1500),
				// submitted before job 10: ahead of it in queue 0;
				// started after it was due (1,800)
				run(11, 1400, on("node-0", 0), ranFrom(1900, 2000), limit(600)),
			}},
			rsv: []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 2100, DueS: 1800}},
		},
		{
			name:   "a job of one GPU is never reserved",
			cfg:    Config{Policy: "fjf", ReserveAfterS: 300},
			snap:   Snapshot{Now: 2000, Nodes: nodes(1), Jobs: []Job{pend(10, 1, 0), run(11, 0, on("node-0", 0), ranFrom(100, 2000))}},
			starts: nil,
		},
		{
			name: "one node: the node that frees first, and a job without a limit takes the other",
			cfg:  Config{Policy: "fjf", ReserveAfterS: 300, LocalityWaitS: -1},
			snap: Snapshot{Now: 1000, Nodes: nodes(4, 4), Jobs: []Job{
				pend(10, 4, 0, model("vgg16")),
				run(1, 100, on("node-0", 0), ranFrom(100, 1000), limit(1900)),
				run(2, 100, on("node-1", 0), ranFrom(100, 1000), limit(1000)),
				run(3, 100, on("node-1", 1), ranFrom(100, 1000), limit(1100)),
				run(4, 100, on("node-1", 2), ranFrom(100, 1000), limit(1200)),
				pend(11, 1, 900),
			}},
			// node-0 frees at 2,000, node-1 at 1,300; best fit would put
			// job 11 on node-1's free GPU
			starts: []int64{11},
			rsv:    []Reservation{{JobID: 10, GPUs: on("node-1", span(0, 4)...), Count: 4, FromS: 1300, DueS: 300}},
		},
		{
			name: "spread: the GPUs that free latest by then, leaving the free ones to others",
			cfg:  Config{Policy: "fjf", ReserveAfterS: 300},
			snap: Snapshot{Now: 1000, Nodes: nodes(4, 4), Jobs: []Job{
				pend(10, 6, 0), // resnet50: may spread
				run(1, 100, on("node-0", 0, 1, 2), ranFrom(100, 1000), limit(1900)),
				run(2, 100, on("node-1", 0, 1), ranFrom(100, 1000), limit(1000)),
				run(3, 100, on("node-1", 2), ranFrom(100, 1000), limit(1100)),
				pend(11, 1, 900),
				pend(12, 1, 901),
				pend(13, 1, 902),
			}},
			// free: node-0:3, node-1:3; node-1's jobs end at 1,100 and
			// 1,200, node-0's at 2,000: six by 2,000 at the earliest, the
			// two free GPUs left to jobs 11 and 12
			starts: []int64{11, 12},
			rsv: []Reservation{{JobID: 10, GPUs: append(on("node-0", 0, 1, 2), on("node-1", 0, 1, 2)...),
				Count: 6, FromS: 2000, DueS: 300}},
		},
		{
			name:   "count mode: the GPUs the earliest ends free; jobs without a limit get only what is not needed then",
			cfg:    Config{Policy: "fjf", ReserveAfterS: 300, Placement: PlaceCount},
			snap:   oneNodeBusy(pend(11, 1, 900), pend(12, 1, 950, limit(100))),
			starts: []int64{12},
			rsv:    []Reservation{{JobID: 10, Count: 8, FromS: 1600, DueS: 300}},
		},
		{
			name: "count mode: a job of 6 leaves 2 GPUs to the others",
			cfg:  Config{Policy: "fjf", ReserveAfterS: 300, Placement: PlaceCount},
			snap: Snapshot{Now: 1000, Nodes: nodes(8), Jobs: []Job{
				pend(10, 7, 0),
				run(1, 100, on("node-0", 0, 1, 2), ranFrom(100, 1000), limit(1100)),
				run(2, 100, on("node-0", 3, 4), ranFrom(100, 1000), limit(2900)),
				pend(11, 1, 900),
				pend(12, 1, 901),
			}},
			// 3 free; 6 at 1,200, 8 at 3,000: reserved from 3,000 with
			// one GPU to spare
			starts: []int64{11},
			rsv:    []Reservation{{JobID: 10, Count: 7, FromS: 3000, DueS: 300}},
		},
		{
			name: "a team's own bound; another team's never",
			cfg:  Config{Policy: "fjf"},
			snap: func() Snapshot {
				s := oneNodeBusy(pend(11, 1, 900, team("b")), pend(20, 8, 0, team("b")))
				s.Jobs[5].Team = "a"
				s.Teams = []Team{{Name: "a", ReserveAfterS: 300}, {Name: "b", ReserveAfterS: -1}}
				return s
			}(),
			starts: nil, // job 11 may not take the reserved GPUs
			rsv:    []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1600, DueS: 300}},
		},
		{
			name: "two reservations at most, in priority order",
			cfg:  Config{Policy: "fjf", ReserveAfterS: 300, MaxReservations: 2, LocalityWaitS: -1},
			snap: Snapshot{Now: 1000, Nodes: nodes(4, 4, 4), Jobs: []Job{
				pend(10, 4, 0, model("vgg16")),
				pend(11, 4, 1, model("vgg16")),
				pend(12, 4, 2, model("vgg16")),
				run(1, 100, on("node-0", 0), ranFrom(100, 1000), limit(1000)),
				run(2, 100, on("node-1", 0), ranFrom(100, 1000), limit(2000)),
				run(3, 100, on("node-2", 0), ranFrom(100, 1000), limit(3000)),
			}},
			rsv: []Reservation{
				{JobID: 10, GPUs: on("node-0", span(0, 4)...), Count: 4, FromS: 1100, DueS: 300},
				{JobID: 11, GPUs: on("node-1", span(0, 4)...), Count: 4, FromS: 2100, DueS: 301},
			},
		},
		{
			name:   "fifo never reserves",
			cfg:    Config{Policy: "fifo", ReserveAfterS: 300},
			snap:   oneNodeBusy(pend(11, 1, 900)),
			starts: nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := mustNew(t, tc.cfg).Schedule(tc.snap)
			if !sameIDs(startIDs(d), tc.starts) {
				t.Errorf("starts %v, want %v", startIDs(d), tc.starts)
			}
			if !sameIDs(preemptIDs(d), tc.preempts) {
				t.Errorf("preempts %v, want %v", preemptIDs(d), tc.preempts)
			}
			if !reflect.DeepEqual(d.Reservations, tc.rsv) {
				t.Errorf("reservations\n%+v\nwant\n%+v", d.Reservations, tc.rsv)
			}
			for id, want := range tc.waits {
				w, ok := waitOf(d, id)
				if !ok || !strings.Contains(w.Reason, want) {
					t.Errorf("job %d waits %q, want it to say %q", id, w.Reason, want)
				}
			}
			if tc.recheck != 0 && d.Recheck != tc.recheck {
				t.Errorf("recheck %v, want %v", d.Recheck, tc.recheck)
			}
			if p, _ := checkDecisions(tc.snap, tc.cfg, d); len(p) > 0 {
				t.Error(joinProblems(p))
			}
		})
	}
}

// team sets a job's team.
func team(name string) func(*Job) { return func(j *Job) { j.Team = name } }

// TestReservationStartsOnItsGPUs: a reserved job that takes its GPUs by
// preempting starts on exactly them, and each preemption says why.
func TestReservationStartsOnItsGPUs(t *testing.T) {
	s := Snapshot{Now: 2000, Nodes: nodes(8), Jobs: []Job{
		pend(10, 8, 0),
		run(11, 900, on("node-0", 0, 1), ranFrom(1000, 2000)),
	}}
	d := mustNew(t, Config{Policy: "tiresias-l", ReserveAfterS: 300}).Schedule(s)
	st, ok := startOf(d, 10)
	if !ok || !slices.Equal(st.GPUs, on("node-0", span(0, 8)...)) {
		t.Fatalf("job 10 starts %v (%v), want node-0:0-7", st.GPUs, ok)
	}
	if len(d.Preempts) != 1 || d.Preempts[0].For != 10 ||
		!strings.HasPrefix(d.Preempts[0].Reason, "preempted for job 10, which had its GPUs reserved") {
		t.Fatalf("preempts %+v", d.Preempts)
	}
	w, _ := waitOf(d, 11)
	if want := "preempted for job 10, whose reservation of its GPUs came due; first in queue 0"; w.Reason != want {
		t.Errorf("job 11 waits %q, want %q", w.Reason, want)
	}
}

// TestReservationUnknownEnds: without limits, a running job is expected to
// need the median of what the distribution leaves a job of its service.
func TestReservationUnknownEnds(t *testing.T) {
	d := NewGPUTimeDist([]float64{100, 200, 400, 800, 1600})
	cases := []struct {
		a, want float64
		ok      bool
	}{
		{0, 400, true},    // median of all: 400
		{150, 250, true},  // of 200, 400, 800, 1600: the second
		{500, 300, true},  // of 800, 1600: the first
		{1000, 600, true}, // of 1600
		{1600, 0, false},  // none above
		{math.NaN(), 0, false},
	}
	for _, tc := range cases {
		got, ok := d.MedianRemaining(tc.a)
		if got != tc.want || ok != tc.ok {
			t.Errorf("MedianRemaining(%v) = %v, %v; want %v, %v", tc.a, got, ok, tc.want, tc.ok)
		}
	}
	// In a pass: two running 2-GPU jobs; one has attained 300 GPU-s (the
	// median of 400, 800, 1,600 less 300: 500 more, 250 s on 2 GPUs), the
	// other 2,000 (past every sample: as long again as it has run,
	// 1,000 s).
	s := Snapshot{Now: 1000, Nodes: nodes(2, 2), GPUTimeDist: d, Jobs: []Job{
		pend(10, 2, 0, model("vgg16")),
		run(1, 100, on("node-0", 0, 1), ranFrom(850, 1000)),
		run(2, 0, on("node-1", 0, 1), ranFrom(0, 1000)),
	}}
	got := mustNew(t, Config{Policy: "fjf", ReserveAfterS: 300, LocalityWaitS: -1}).Schedule(s).Reservations
	want := []Reservation{{JobID: 10, GPUs: on("node-0", 0, 1), Count: 2, FromS: 1250, DueS: 300}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reservations %+v, want %+v", got, want)
	}
}

func TestReservationGPUText(t *testing.T) {
	cases := []struct {
		r    Reservation
		want string
	}{
		{Reservation{Count: 8}, "8 GPUs"},
		{Reservation{Count: 1}, "1 GPU"},
		{Reservation{GPUs: on("node-0", 3), Count: 1}, "GPU node-0:3"},
		{Reservation{GPUs: on("node-3", span(0, 8)...), Count: 8}, "GPUs node-3:0-7"},
		{Reservation{GPUs: append(on("a", 0, 2, 3, 4, 7), on("b", 1)...), Count: 6}, "GPUs a:0,2-4,7 and b:1"},
		{Reservation{GPUs: slices.Concat(on("a", 6, 7), on("b", 0), on("c", 0, 1)), Count: 5}, "GPUs a:6-7, b:0 and c:0-1"},
	}
	for _, tc := range cases {
		if got := tc.r.GPUText(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
	r := Reservation{GPUs: on("node-3", span(0, 8)...), Count: 8, FromS: 1420}
	if got, want := r.Clause(1000), "GPUs node-3:0-7 reserved for it, expected free in 420 s"; got != want {
		t.Errorf("Clause = %q, want %q", got, want)
	}
	if got, want := r.Clause(1420), "GPUs node-3:0-7 reserved for it, expected free now"; got != want {
		t.Errorf("Clause = %q, want %q", got, want)
	}
}

func TestReservationConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Policy: "fjf", ReserveAfterS: -1},
		{Policy: "fjf", ReserveAfterS: math.NaN()},
		{Policy: "fjf", ReserveAfterS: math.Inf(1)},
		{Policy: "fjf", MaxReservations: -1},
		{Policy: "fjf", MaxReservations: maxReservations + 1},
		{Policy: "fjf", HandoverS: -1},
		{Policy: "fjf", HandoverS: math.NaN()},
		{Policy: "fjf", HandoverS: math.Inf(1)},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	if got := mustNew(t, Config{Policy: "fjf"}).Config().MaxReservations; got != DefaultMaxReservations {
		t.Errorf("default MaxReservations %d", got)
	}
}

// reservationConfigs are the configurations the reservation property tests
// sweep: every policy, in both placements, with and without
// explanations, preemption and relaxing locality, and two reservations.
func reservationConfigs() []Config {
	var out []Config
	for _, pol := range Policies() {
		out = append(out,
			Config{Policy: pol, ReserveAfterS: 1000, LocalityWaitS: -1},
			Config{Policy: pol, ReserveAfterS: 1000, Placement: PlaceCount},
			Config{Policy: pol, ReserveAfterS: 1000, OmitWaits: true, MaxReservations: 2},
			Config{Policy: pol, ReserveAfterS: 1000, NoPreemption: true, LocalityWaitS: 1000},
			Config{Policy: pol, ReserveAfterS: 1000, Placement: PlaceCount, MaxReservations: 3, OmitWaits: true},
			// The lead (rule 7 of "Reservations"): due at half the
			// bound, or 400 s before it, the deadline at the bound.
			Config{Policy: pol, ReserveAfterS: 1000, ReserveLeadS: LeadHalfBound, LocalityWaitS: -1, MaxReservations: 2},
			Config{Policy: pol, ReserveAfterS: 1000, ReserveLeadS: 400, Placement: PlaceCount},
		)
	}
	return out
}

// withLimits gives some of the jobs of snaps time limits (some already
// used up), makes some interactive sessions, and shuffles nothing else.
func withLimits(snaps []Snapshot, seed uint64) []Snapshot {
	rng := rand.New(rand.NewPCG(seed, 31))
	out := make([]Snapshot, len(snaps))
	for i, s := range snaps {
		s.Jobs = slices.Clone(s.Jobs)
		for k := range s.Jobs {
			j := &s.Jobs[k]
			switch rng.IntN(4) {
			case 0:
				j.TimeLimitS = j.ExecutedS + rng.Float64()*20000
			case 1:
				j.TimeLimitS = rng.Float64() * 2000
			}
			j.Interactive = rng.IntN(8) == 0
			if j.State == Running && j.LastStartTime == 0 {
				j.LastStartTime = s.Now - rng.Float64()*5000
			}
		}
		out[i] = s
	}
	return out
}

// reservationProblems runs a pass by hand and checks its reservations:
// they name waiting jobs that did not start, as many GPUs as the job
// asks, from now on; in nodes mode, distinct GPUs of schedulable machines
// the job does not avoid; and every job started after the reservation
// on its GPUs may backfill them (mayBackfill).
func reservationProblems(sc *Scheduler, s Snapshot) []string {
	var out []string
	bad := func(f string, args ...any) { out = append(out, fmt.Sprintf(f, args...)) }
	p := new(pass)
	d := p.run(sc, &s)
	exists, schedulable := gpuIndex(s)
	jobs, index := map[int64]*Job{}, map[int64]int32{}
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID], index[s.Jobs[i].ID] = &s.Jobs[i], int32(i)
	}
	started := map[int64]bool{}
	for _, st := range d.Starts {
		started[st.JobID] = true
	}
	taken := map[gpu.Ref]int64{}
	for k, r := range d.Reservations {
		j := jobs[r.JobID]
		switch {
		case j == nil || j.State != Pending || started[r.JobID]:
			bad("reservation %+v: not a waiting job", r)
			continue
		case r.Count != j.GPUs:
			bad("reservation %+v: job asks %d GPUs", r, j.GPUs)
		case !(r.FromS >= s.Now) || !(r.DueS <= s.Now):
			bad("reservation %+v at %v: from or due out of order", r, s.Now)
		}
		if p.count {
			if len(r.GPUs) != 0 {
				bad("reservation %+v names GPUs in count mode", r)
			}
			continue
		}
		if len(r.GPUs) != r.Count {
			bad("reservation %+v: %d GPUs named", r, len(r.GPUs))
		}
		for _, g := range r.GPUs {
			switch {
			case !exists[g] || !schedulable[g.Node]:
				bad("reservation %+v: GPU %v is no schedulable GPU", r, g)
			case slices.Contains(j.AvoidNodes, g.Node):
				bad("reservation %+v: the job avoids %s", r, g.Node)
			case taken[g] != 0:
				bad("reservation %+v: GPU %v reserved for job %d too", r, g, taken[g])
			}
			taken[g] = r.JobID
		}
		rk := &p.rsv[k]
		for _, st := range d.Starts[rk.starts:] {
			for _, g := range st.GPUs {
				if taken[g] == r.JobID && !p.mayBackfill(index[st.JobID], rk) {
					bad("job %d starts on %v, reserved for job %d from %v, and may not backfill", st.JobID, g, r.JobID, r.FromS)
				}
			}
		}
	}
	// Under fair share no reservation preempts a job that started due
	// before its holder in the order of reservations (dueFirst); without
	// it the policy's rank still may.
	for ri := range p.runs {
		if !p.fair {
			break
		}
		run := &p.runs[ri]
		if run.state&^runReached != runPreempted || run.flags&runForReservation == 0 {
			continue
		}
		j := &s.Jobs[run.job]
		if p.dueFirst(j, run.byJob) {
			bad("job %d, started due before job %d in the order of reservations, preempted for it", j.ID, s.Jobs[run.byJob].ID)
		}
	}
	return out
}

// TestReservationProperties: with reservations, random snapshots keep
// every invariant of a pass and of reservations, the same snapshot in
// another order gives the same decisions, and a preemptive policy
// without fair share stays work-conserving (its backfills are
// preemptible).
func TestReservationProperties(t *testing.T) {
	snaps := withLimits(propertySnapshots(11, 300), 12)
	rng := rand.New(rand.NewPCG(13, 13))
	made, conserved, skipped := 0, 0, 0
	for _, cfg := range reservationConfigs() {
		sc := mustNew(t, cfg)
		for i, s := range snaps {
			d := sc.Schedule(s)
			made += len(d.Reservations)
			p, a := checkDecisions(s, cfg, d)
			p = append(p, reservationProblems(sc, s)...)
			if q := internalProblems(sc, s); q != "" {
				p = append(p, q)
			}
			if len(p) > 0 {
				t.Fatalf("%+v, snapshot %d:\n%s", cfg, i, joinProblems(p))
			}
			shuffled := s
			shuffled.Jobs = slices.Clone(s.Jobs)
			rng.Shuffle(len(shuffled.Jobs), func(a, b int) {
				shuffled.Jobs[a], shuffled.Jobs[b] = shuffled.Jobs[b], shuffled.Jobs[a]
			})
			if first, other := normalize(d), normalize(sc.Schedule(shuffled)); !reflect.DeepEqual(first, other) {
				t.Fatalf("%+v, snapshot %d: the order of jobs changes the decisions\n%+v\n%+v", cfg, i, first, other)
			}
			pol := policyByName(cfg.Policy)
			if !pol.preempts || cfg.NoPreemption || cfg.LocalityWaitS >= 0 && cfg.Placement != PlaceCount {
				continue
			}
			if cfg.Placement != PlaceCount {
				a.preempt = nil
			}
			if forReservation(d) {
				// Its victims may free more GPUs than it takes, too few
				// for the jobs that rank below them, which the walk
				// decided before it.
				skipped++
				continue
			}
			if p := unconserved(withoutHeldSessions(s, cfg, d), cfg, d, a); len(p) > 0 {
				t.Fatalf("%+v, snapshot %d:\n%s", cfg, i, joinProblems(p))
			}
			conserved++
		}
	}
	t.Logf("%d reservations; work conservation checked on %d passes, %d passes skipped", made, conserved, skipped)
	if made < 1000 || conserved < 1000 {
		t.Errorf("only %d reservations made, %d passes checked for work conservation: the snapshots do not test them", made, conserved)
	}
}

// forReservation tells whether a job was preempted for a reserved job.
func forReservation(d Decisions) bool {
	return slices.ContainsFunc(d.Preempts, func(p Preempt) bool { return strings.Contains(p.Reason, "had its GPUs reserved") })
}

// TestReservationOmitWaits: without explanations (the simulator) a pass
// decides what it decides with them (the engine): in particular, it goes
// on past a full cluster to the first job due for a reservation.
func TestReservationOmitWaits(t *testing.T) {
	snaps := withLimits(propertySnapshots(21, 300), 22)
	// The job due is not first in line: 1-GPU jobs rank above it.
	snaps = append(snaps, Snapshot{Now: 2000, Nodes: nodes(4), Jobs: []Job{
		run(1, 0, on("node-0", 0, 1, 2, 3), ranFrom(1900, 2000), lasting(500), limit(500)),
		pend(2, 4, 0, lasting(1000)),
		pend(3, 1, 1500, lasting(10)),
	}})
	for _, cfg := range reservationConfigs() {
		if cfg.OmitWaits {
			continue
		}
		omit := cfg
		omit.OmitWaits = true
		with, without := mustNew(t, cfg), mustNew(t, omit)
		for i, s := range snaps {
			a, b := with.Schedule(s), without.Schedule(s)
			a.Waits, b.Waits = nil, nil
			if !reflect.DeepEqual(normalize(a), normalize(b)) {
				t.Fatalf("%+v, snapshot %d: with explanations\n%+v\nwithout\n%+v", cfg, i, a, b)
			}
		}
	}
	d := mustNew(t, Config{Policy: "srsf", ReserveAfterS: 300, OmitWaits: true}).Schedule(snaps[len(snaps)-1])
	if len(d.Reservations) != 1 || d.Reservations[0].JobID != 2 {
		t.Errorf("srsf, the cluster full, job 2 due behind job 3: reservations %+v", d.Reservations)
	}
}

// withoutHeldSessions drops from s, when d reserves GPUs, the waiting
// interactive sessions that a reservation may hold back, since they could
// not be preempted there: those that have not waited their bound, and
// those with a time limit (held unless it ends them before the
// reservation's start).
func withoutHeldSessions(s Snapshot, cfg Config, d Decisions) Snapshot {
	if len(d.Reservations) == 0 {
		return s
	}
	s.Jobs = slices.DeleteFunc(slices.Clone(s.Jobs), func(j Job) bool {
		return j.State == Pending && rsvProtected(&j) && (hasLimit(&j) || waitedS(&j, s.Now) < cfg.ReserveAfterS)
	})
	return s
}

// teamOf sets a job's team.
func teamOf(name string) func(*Job) { return func(j *Job) { j.Team = name } }

// TestReservationFairShare: under fair share (teams vision and nlp, 4 of
// 8 GPUs each, a bound of 300 s), nlp's 8-GPU job borrows 4 GPUs. It is
// reserved at its policy rank, even while a job within its guarantee
// waits; the jobs that start on its GPUs before their bound are
// preemptible backfills of any team, and a job within its guarantee that
// had waited its bound when it started is waited for, never preempted.
func TestReservationFairShare(t *testing.T) {
	teams := []Team{{Name: "vision", GuaranteeGPUs: 4}, {Name: "nlp", GuaranteeGPUs: 4}}
	vision, nlp := teamOf("vision"), teamOf("nlp")
	all := on("node-0", span(0, 8)...)
	// big is nlp's 8-GPU job, submitted at 0, due since 300; demoted has
	// run 600 s before (queue 1 of tiresias-l: below new jobs; its lend,
	// the minimum runtime, so that it takes no other team's guaranteed
	// work), and is due since 900.
	big, demoted := pend(10, 8, 0, nlp), pend(10, 8, 0, nlp, served(600))
	late := pend(10, 8, 2450, nlp)
	cases := []struct {
		name     string
		policy   string
		now      float64
		jobs     []Job
		starts   []int64
		preempts []int64
		rsv      []Reservation
		waits    map[int64]string
	}{
		{
			name:   "reserved while lending is stopped: vision's job 12 within its guarantee waits for nlp's young borrower",
			policy: "tiresias-l",
			now:    2000,
			jobs: []Job{
				demoted,
				run(1, 900, on("node-0", 0), vision, ranFrom(1000, 2000), limit(1500)),
				run(2, 900, on("node-0", 1), vision, ranFrom(1000, 2000), limit(1600)),
				run(3, 900, on("node-0", 2), vision, ranFrom(1000, 2000), limit(1700)),
				run(4, 900, on("node-0", 3), nlp, ranFrom(1000, 2000), limit(1200)),
				run(5, 900, on("node-0", 4), nlp, ranFrom(1000, 2000), limit(1200)),
				run(6, 900, on("node-0", 5), nlp, ranFrom(1000, 2000), limit(1200)),
				run(7, 900, on("node-0", 6), nlp, ranFrom(1000, 2000), limit(1200)),
				run(8, 1800, on("node-0", 7), nlp, ranFrom(1900, 2000), limit(500)),
				pend(12, 1, 1990, vision),
			},
			// the last of them, job 3, ends by its limit at 2,700
			rsv: []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 2700, DueS: 900}},
			waits: map[int64]string{
				10: "no GPUs are lent while job 12 of team vision, within its guarantee, waits for GPUs; GPUs node-0:0-7 reserved for it, expected free in 700 s",
				12: "GPUs lent to other teams may be reclaimed in 500 s",
			},
		},
		{
			name:   "it starts once the jobs from before are gone, preempting the backfills of either team",
			policy: "tiresias-l",
			now:    3000,
			jobs: []Job{
				big,
				// vision's job waited 100 s, nlp's 50 s, when they
				// started, after 300
				run(1, 2400, on("node-0", 0), vision, ranFrom(2500, 3000)),
				run(2, 2550, on("node-0", 1, 2), nlp, ranFrom(2600, 3000)),
			},
			starts:   []int64{10},
			preempts: []int64{1, 2},
		},
		{
			// Job 1: 2 GPUs for 2,900 s, 5,800 GPU-s, queue 1 of
			// tiresias-l, below job 10; job 2, vision's, a backfill.
			// Preempting job 1 alone would not free enough: the
			// reservation preempts both.
			name:   "its own team's job that the policy ranks below it is preempted, though it started before it was due",
			policy: "tiresias-l",
			now:    3000,
			jobs: []Job{big,
				run(1, 0, on("node-0", 0, 1), nlp, ranFrom(100, 3000)),
				run(2, 2550, on("node-0", 2, 3), vision, ranFrom(2600, 3000)),
			},
			starts:   []int64{10},
			preempts: []int64{1, 2},
		},
		{
			// nlp's 8-GPU job 9 started at 2,900, having waited its
			// bound; it borrows, so the walk defers it, and job 10 is
			// decided at its rank before it: job 9 ranks above job 10
			// (running, queue 0) and is no backfill. Preempting it
			// handed the machine from one 8-GPU job to the next (issue
			// 30).
			name:   "its own team's job that the policy ranks above it is not preempted, though the walk reaches it later",
			policy: "tiresias-l",
			now:    3000,
			jobs:   []Job{big, run(9, 0, all, nlp, ranFrom(2900, 3000), limit(200))},
			rsv:    []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 3100, DueS: 300}},
		},
		{
			name:   "another team's job from before it was due is waited for",
			policy: "tiresias-l",
			now:    3000,
			jobs:   []Job{big, run(1, 0, on("node-0", 0, 1, 2, 3), vision, ranFrom(100, 3000), limit(3500))},
			rsv:    []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 3600, DueS: 300}},
		},
		{
			// late is due since 2,750, its deadline 3,050.
			name:   "a backfill within its team's guarantee that had waited its bound is waited for before the deadline",
			policy: "tiresias-l",
			now:    3000,
			jobs: []Job{
				late,
				// waited 1,800 s when it started at 2,800; its limit
				// ends it at 3,700
				run(1, 1000, on("node-0", 0), vision, ranFrom(2800, 3000), limit(900)),
			},
			rsv: []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 3050, DueS: 2750}},
		},
		{
			name:   "and taken at the deadline: it started on the reserved GPUs after the job was due",
			policy: "tiresias-l",
			now:    3050,
			jobs: []Job{
				late,
				run(1, 1000, on("node-0", 0), vision, ranFrom(2800, 3050), limit(900)),
			},
			starts:   []int64{10},
			preempts: []int64{1},
		},
		{
			// On the demo 2-GPU jobs of the other team, each due
			// itself once it had waited its bound, started one after
			// another on the reserved GPUs within their guarantee,
			// and the 8-GPU job waited past its deadline (issue 30).
			// Job 1 was due itself, long before job 10, but asks
			// fewer GPUs: job 10 comes first (compareDue).
			name:   "and so is one that asks several GPUs and was due itself",
			policy: "tiresias-l",
			now:    3050,
			jobs: []Job{
				late,
				run(1, 1000, on("node-0", 0, 1), vision, ranFrom(2800, 3050)),
			},
			starts:   []int64{10},
			preempts: []int64{1},
		},
		{
			// vision's job 1 borrows (5 GPUs of its guarantee of 4),
			// due itself when it started, after job 10 was due.
			name:   "and a borrower of the other team due itself that started on them",
			policy: "tiresias-l",
			now:    3050,
			jobs: []Job{
				late,
				run(1, 1000, on("node-0", 0, 1, 2, 3, 4), vision, ranFrom(2800, 3050)),
			},
			starts:   []int64{10},
			preempts: []int64{1},
		},
		{
			// vision's job 1, 8 GPUs too, submitted before job 10,
			// had waited 360 s when it started: its deadline, 3,040,
			// came before job 10's. Of jobs of as many GPUs the one
			// whose deadline comes first is reserved first, and a job
			// that started due before another is not undone by its
			// deadline (dueFirst): job 10 waits for it.
			name:   "but not one as big that was due before it",
			policy: "tiresias-l",
			now:    3050,
			jobs: []Job{
				late,
				run(1, 2440, all, vision, ranFrom(2800, 3050), limit(900)),
			},
			rsv: []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 3700, DueS: 2750}},
		},
		{
			name:   "but not by a reserved job that has had its lend: its team's guarantee is lent once",
			policy: "tiresias-l",
			now:    3700,
			jobs: []Job{
				// ran 600 s, the minimum runtime (lendS): due since
				// 3,350, its deadline 3,650
				pend(10, 8, 2450, nlp, served(600)),
				run(1, 1000, on("node-0", 0), vision, ranFrom(3400, 3700), limit(900)),
			},
			rsv: []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 4300, DueS: 3350}},
		},
		{
			// Cut 100 s into its run, by another reservation or its own
			// team, it has not had its lend.
			name:     "one cut before its lend takes it",
			policy:   "tiresias-l",
			now:      3200,
			jobs:     []Job{pend(10, 8, 2450, nlp, served(100)), run(1, 1000, on("node-0", 0), vision, ranFrom(2900, 3200), limit(900))},
			starts:   []int64{10},
			preempts: []int64{1},
		},
		{
			name:   "nor one that started before the job was due",
			policy: "tiresias-l",
			now:    3100,
			jobs: []Job{
				late,
				run(1, 1000, on("node-0", 0), vision, ranFrom(2700, 3100), limit(900)),
			},
			rsv: []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 3600, DueS: 2750}},
		},
		{
			name:   "without preemption (fjf), a job within its guarantee is held back until it has waited its bound",
			policy: "fjf",
			now:    3000,
			jobs: []Job{
				big,
				run(1, 1000, on("node-0", 0), vision, ranFrom(2000, 3000), limit(1500)),
				pend(11, 1, 2900, vision), // waited 100 s
				pend(12, 1, 2500, vision), // waited 500 s
				pend(13, 1, 2800, nlp),    // the reserved job's own team, waited 200 s
			},
			starts: []int64{12},
			rsv:    []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 3500, DueS: 300}},
			waits: map[int64]string{
				11: "free GPUs held for job 10's reservation",
				13: "free GPUs held for job 10's reservation",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Policy: tc.policy, ReserveAfterS: 300}
			s := Snapshot{Now: tc.now, Nodes: nodes(8), Jobs: tc.jobs, Teams: teams}
			d := mustNew(t, cfg).Schedule(s)
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Fatal(joinProblems(p))
			}
			sc := mustNew(t, cfg)
			if p := append(fairProblems(sc, s, cfg, d), reservationProblems(sc, s)...); len(p) > 0 {
				t.Fatal(joinProblems(p))
			}
			var starts, preempts []int64
			for _, st := range d.Starts {
				starts = append(starts, st.JobID)
			}
			for _, p := range d.Preempts {
				preempts = append(preempts, p.JobID)
				if p.Reclaim || !strings.Contains(p.Reason, "preempted for job 10, which had its GPUs reserved") {
					t.Errorf("preemption %+v: want one for the reservation, not a reclaim", p)
				}
			}
			slices.Sort(starts)
			slices.Sort(preempts)
			if !slices.Equal(starts, tc.starts) || !slices.Equal(preempts, tc.preempts) {
				t.Errorf("starts %v, preempts %v; want %v, %v", starts, preempts, tc.starts, tc.preempts)
			}
			if !reflect.DeepEqual(d.Reservations, tc.rsv) {
				t.Errorf("reservations %+v, want %+v", d.Reservations, tc.rsv)
			}
			for id, want := range tc.waits {
				got := ""
				for _, w := range d.Waits {
					if w.JobID == id {
						got = w.Reason
					}
				}
				if !strings.Contains(got, want) {
					t.Errorf("job %d waits %q, want %q in it", id, got, want)
				}
			}
		})
	}
}

// TestReservationSharedGPU: a GPU that sharing jobs hold together frees
// when the last of them ends. Before, no run held it alone, so it was
// never expected free: on a machine of 8 with one shared GPU an 8-GPU job
// got no reservation, and the 4-GPU jobs behind it took the one there
// was (the demo, issue 30).
func TestReservationSharedGPU(t *testing.T) {
	sh := shares(8000, 2000)
	s := Snapshot{Now: 1000, Nodes: nodes(8), Jobs: []Job{
		run(1, 0, on("node-0", 0, 1, 2), ranFrom(900, 1000), limit(400)), // ends at 1,300
		run(2, 0, on("node-0", 7), ranFrom(900, 1000), limit(500), sh),   // 1,400
		run(3, 0, on("node-0", 7), ranFrom(950, 1000), limit(600), sh),   // 1,550
		pend(10, 8, 0),
		pend(11, 4, 100),
	}}
	// fjf waits for the shared GPU's last job (1,550). Under tiresias-l
	// job 10 is past its deadline (600), and jobs 2 and 3, batch jobs
	// that may both be taken, free their shared GPU now: it waits only
	// for job 1 (1,300), which was due itself when it started.
	for policy, from := range map[string]float64{"fjf": 1550, "tiresias-l": 1300} {
		cfg := Config{Policy: policy, ReserveAfterS: 300}
		d := mustNew(t, cfg).Schedule(s)
		want := []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: from, DueS: 300}}
		if !reflect.DeepEqual(d.Reservations, want) {
			t.Errorf("%s: reservations %+v, want %+v", policy, d.Reservations, want)
		}
		if p := reservationProblems(mustNew(t, cfg), s); len(p) > 0 {
			t.Error(joinProblems(p))
		}
	}
	// Before its deadline (due at 900, the deadline 1,200), the shared
	// GPU is expected free at the deadline, when jobs 2 and 3 will be
	// taken, not at their ends (1,550): job 1 (1,300) is the last, where
	// the reservation's start read 1,550 (live, a job reserved with a
	// 1-minute bound showed a start 36 minutes away, and took its GPUs
	// at the deadline; issue 30).
	early := s
	early.Jobs = append(slices.Clone(s.Jobs[:3]), pend(10, 8, 600))
	for policy, want := range map[string]Reservation{
		"fjf":        {JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1550, DueS: 900},
		"tiresias-l": {JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1300, DueS: 900},
	} {
		cfg := Config{Policy: policy, ReserveAfterS: 300}
		d := mustNew(t, cfg).Schedule(early)
		if !reflect.DeepEqual(d.Reservations, []Reservation{want}) {
			t.Errorf("%s, before the deadline: reservations %+v, want %+v", policy, d.Reservations, want)
		}
		if slices.ContainsFunc(d.Preempts, func(pr Preempt) bool { return pr.JobID == 2 || pr.JobID == 3 }) {
			t.Errorf("%s, before the deadline: the sharing jobs are taken: %+v", policy, d.Preempts)
		}
	}
	// A sharing job without a limit may backfill the reserved GPUs as a
	// preemptible job (tiresias-l), but not by joining the shared one:
	// no run holds that GPU alone, so nothing on it is preempted for the
	// reservation, and sharers joining one after another would hold it.
	s.Jobs = append(s.Jobs, pend(12, 1, 900, sh))
	cfg := Config{Policy: "tiresias-l", ReserveAfterS: 300}
	d := mustNew(t, cfg).Schedule(s)
	if st, ok := startOf(d, 12); ok && slices.Contains(st.GPUs, gpu.Ref{Node: "node-0", Index: 7}) {
		t.Errorf("the sharing job joins the reserved shared GPU: %+v", st)
	}
	if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
		t.Error(joinProblems(p))
	}
}

// TestReservationKept: a reservation handed back (Snapshot.Reservations)
// stays with its job: another job due, ranked above it, does not take
// it; its GPUs stay the same while they suit the job, though others are
// now expected to free earlier; its start only moves earlier.
func TestReservationKept(t *testing.T) {
	// Two machines of 4. Job 10 (4 GPUs, due since 300, its deadline
	// 600) holds node-0 from 1,500. Job 9 (4 GPUs, submitted before it)
	// has a bound of its team's, 900 s, and is due now, its deadline at
	// 1,790: ranked above job 10, it does not take the one reservation
	// even when none was kept (of jobs as big, the earliest deadline
	// first: rsvRoom).
	base := func(now float64, endsAt0, endsAt1 float64) Snapshot {
		return Snapshot{Now: now, Nodes: nodes(4, 4),
			Teams: []Team{{Name: "late", ReserveAfterS: 900}},
			Jobs: []Job{
				run(1, 0, on("node-0", 0, 1, 2, 3), ranFrom(500, now), limit(endsAt0-500)),
				run(2, 0, on("node-1", 0, 1, 2, 3), ranFrom(500, now), limit(endsAt1-500)),
				pend(9, 4, -10, teamOf("late")),
				pend(10, 4, 0),
			}}
	}
	held := Reservation{JobID: 10, GPUs: on("node-0", 0, 1, 2, 3), Count: 4, FromS: 1500, DueS: 300}
	cases := []struct {
		name string
		snap Snapshot
		kept []Reservation
		want []Reservation
	}{
		{
			name: "none kept: the job due whose deadline comes first takes the one reservation, on the machine that frees first",
			snap: base(1000, 1500, 1400),
			want: []Reservation{{JobID: 10, GPUs: on("node-1", 0, 1, 2, 3), Count: 4, FromS: 1400, DueS: 300}},
		},
		{
			name: "kept: job 10 keeps it, and its machine",
			snap: base(1000, 1500, 1400),
			kept: []Reservation{held},
			want: []Reservation{held},
		},
		{
			name: "kept: its machine now expected free later, its start stays",
			snap: base(1000, 1700, 1400),
			kept: []Reservation{held},
			want: []Reservation{held},
		},
		{
			name: "kept: its machine now expected free earlier, its start moves earlier",
			snap: base(1000, 1200, 1400),
			kept: []Reservation{held},
			want: []Reservation{{JobID: 10, GPUs: held.GPUs, Count: 4, FromS: 1200, DueS: 300}},
		},
		{
			name: "kept past its start: expected free now",
			snap: base(1600, 1700, 1800),
			kept: []Reservation{held},
			want: []Reservation{{JobID: 10, GPUs: held.GPUs, Count: 4, FromS: 1600, DueS: 300}},
		},
		{
			name: "kept for a job that no longer waits: ignored",
			snap: base(1000, 1500, 1400),
			kept: []Reservation{{JobID: 77, GPUs: held.GPUs, Count: 4, FromS: 1100}},
			want: []Reservation{{JobID: 10, GPUs: on("node-1", 0, 1, 2, 3), Count: 4, FromS: 1400, DueS: 300}},
		},
		{
			name: "kept on GPUs that no longer suit it (another machine's name): reserved afresh, still its own",
			snap: base(1000, 1500, 1400),
			kept: []Reservation{{JobID: 10, GPUs: on("node-9", 0, 1, 2, 3), Count: 4, FromS: 1100, DueS: 300}},
			want: []Reservation{{JobID: 10, GPUs: on("node-1", 0, 1, 2, 3), Count: 4, FromS: 1400, DueS: 300}},
		},
	}
	for _, policy := range []string{"fjf", "tiresias-l"} {
		for _, tc := range cases {
			t.Run(policy+": "+tc.name, func(t *testing.T) {
				// Thresholds no job reaches: the running jobs stay in
				// tiresias-l's first queue, above the waiting ones.
				cfg := Config{Policy: policy, ReserveAfterS: 300, Thresholds: []float64{1e7}}
				if policy == "fjf" {
					cfg.Thresholds = nil
				}
				s := tc.snap
				s.Reservations = tc.kept
				d := mustNew(t, cfg).Schedule(s)
				if !reflect.DeepEqual(d.Reservations, tc.want) {
					t.Errorf("reservations %+v, want %+v", d.Reservations, tc.want)
				}
				if len(d.Starts) > 0 || len(d.Preempts) > 0 {
					t.Errorf("starts %v, preempts %v; want none", startIDs(d), preemptIDs(d))
				}
				// Job 9, due and ranked first, says why it has none.
				const behind = "due for a reservation: jobs past their deadline by 6 bounds are reserved first, the earliest first, then jobs that ask more GPUs, or as many with earlier deadlines"
				if w, _ := waitOf(d, 9); !strings.Contains(w.Reason, behind) {
					t.Errorf("job 9 waits: %q, want it to say %q", w.Reason, behind)
				}
				if p := reservationProblems(mustNew(t, cfg), s); len(p) > 0 {
					t.Error(joinProblems(p))
				}
			})
		}
	}
	// Count placement: the holder keeps it too, and its start only moves
	// earlier.
	cfg := Config{Policy: "fjf", ReserveAfterS: 300, Placement: PlaceCount}
	s := base(1000, 1700, 1600)
	s.Reservations = []Reservation{{JobID: 10, Count: 4, FromS: 1500, DueS: 300}}
	d := mustNew(t, cfg).Schedule(s)
	if want := []Reservation{{JobID: 10, Count: 4, FromS: 1500, DueS: 300}}; !reflect.DeepEqual(d.Reservations, want) {
		t.Errorf("count placement: reservations %+v, want %+v", d.Reservations, want)
	}
}

// TestReservationKeptFairShare: under fair share, a borrower that holds
// a reservation starts on its GPUs once they are free, at its rank.
// Before, a borrower that fit the free GPUs was deferred to the
// borrowers, behind the jobs within their guarantee, which took the
// GPUs held for it; it lost its reservation, and a 4-GPU job behind it
// got one (the demo, issue 30).
func TestReservationKeptFairShare(t *testing.T) {
	vision, nlp := teamOf("vision"), teamOf("nlp")
	teams := []Team{{Name: "vision", GuaranteeGPUs: 4}, {Name: "nlp", GuaranteeGPUs: 4}}
	all := on("node-0", span(0, 8)...)
	s := Snapshot{Now: 1000, Nodes: nodes(8), Teams: teams, Jobs: []Job{
		pend(15, 8, 300, vision),
		pend(21, 4, 366, vision),
		pend(30, 1, 900, nlp),
		pend(31, 1, 950, nlp),
	}}
	cfg := Config{Policy: "tiresias-l", ReserveAfterS: 60, MinRuntimeS: 30}
	for _, tc := range []struct {
		name   string
		kept   []Reservation
		starts []int64
	}{
		{name: "none kept: deferred behind the jobs within their guarantee", starts: []int64{21, 30, 31}},
		{name: "kept: it starts", kept: []Reservation{{JobID: 15, GPUs: all, Count: 8, FromS: 1000, DueS: 360}}, starts: []int64{15}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := s
			s.Reservations = tc.kept
			d := mustNew(t, cfg).Schedule(s)
			if got := sorted(startIDs(d)); !slices.Equal(got, tc.starts) {
				t.Errorf("starts %v, want %v", got, tc.starts)
			}
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Error(joinProblems(p))
			}
			if p := fairProblems(mustNew(t, cfg), s, cfg, d); len(p) > 0 {
				t.Error(joinProblems(p))
			}
		})
	}
}

// TestReservationKeptSequence: over random snapshots and every policy,
// a pass given the last pass's reservations (its decisions applied, the
// clock 10 s on) leaves every reserved job started or still reserved, on
// the same GPUs (nodes mode), from no later than before (or now).
func TestReservationKeptSequence(t *testing.T) {
	snaps := withLimits(propertySnapshots(41, 200), 42)
	// The same snapshots under fair share: two teams, each guaranteed
	// half the GPUs, their jobs alternating.
	for _, s := range snaps[:100] {
		s.Jobs = slices.Clone(s.Jobs)
		gpus := 0
		for _, n := range s.Nodes {
			gpus += len(n.GPUs)
		}
		for i := range s.Jobs {
			s.Jobs[i].Team = []string{"vision", "nlp"}[i%2]
		}
		s.Teams = []Team{{Name: "vision", GuaranteeGPUs: gpus / 2}, {Name: "nlp", GuaranteeGPUs: gpus - gpus/2}}
		snaps = append(snaps, s)
	}
	kept, gaveWay := 0, 0
	for _, cfg := range reservationConfigs() {
		sc := mustNew(t, cfg)
		for i, s := range snaps {
			d1 := sc.Schedule(s)
			if len(d1.Reservations) == 0 {
				continue
			}
			next := s
			next.Jobs = slices.Clone(s.Jobs)
			applyPass(&next, d1)
			advance(&next, 10)
			next.Reservations = d1.Reservations
			d2 := sc.Schedule(next)
			p, _ := checkDecisions(next, cfg, d2)
			p = append(p, reservationProblems(sc, next)...)
			if q := internalProblems(sc, next); q != "" {
				p = append(p, q)
			}
			started := map[int64]bool{}
			for _, st := range d2.Starts {
				started[st.JobID] = true
			}
			now := map[int64]Reservation{}
			for _, r := range d2.Reservations {
				now[r.JobID] = r
			}
			for _, r := range d1.Reservations {
				if started[r.JobID] {
					continue
				}
				got, ok := now[r.JobID]
				switch {
				case lentGaveWay(next, cfg, r.JobID) && (!ok || !slices.Equal(got.GPUs, r.GPUs)):
					gaveWay++
				case dueBefore(next, cfg, r) && (!ok || !slices.Equal(got.GPUs, r.GPUs) || got.FromS > max(r.FromS, next.Now)):
					// Jobs due are reserved the biggest, then the
					// earliest deadline first (rsvRoom): one before
					// it, which the last pass did not reserve, has
					// its turn, and it keeps nothing (rsvScanEnd); if
					// that job starts instead, the walk may give the
					// reservation to a job it reaches after it.
					gaveWay++
				case !ok:
					p = append(p, fmt.Sprintf("job %d held %+v and lost it: %+v", r.JobID, r, d2.Reservations))
				case !slices.Equal(got.GPUs, r.GPUs):
					p = append(p, fmt.Sprintf("job %d held GPUs %v, now %v", r.JobID, r.GPUs, got.GPUs))
				case got.FromS > max(r.FromS, next.Now):
					p = append(p, fmt.Sprintf("job %d's reservation from %v, now later: %v", r.JobID, r.FromS, got.FromS))
				default:
					kept++
				}
			}
			if len(p) > 0 {
				t.Fatalf("%+v, snapshot %d:\n%s", cfg, i, joinProblems(p))
			}
		}
	}
	t.Logf("%d reservations kept, %d given way by jobs that had had their lend or to jobs due before them", kept, gaveWay)
	if kept < 200 {
		t.Errorf("only %d reservations kept: the snapshots do not test them", kept)
	}
}

// dueBefore tells whether a job of several GPUs waits in s that comes
// before r's holder among the jobs due for a reservation under cfg (its
// wait past the bound, or the bound less the lead): a late one (its
// deadline lateBounds bounds behind it) that became due before it or
// while it is not late; else one that asks more GPUs, or as many and
// became due before it.
func dueBefore(s Snapshot, cfg Config, r Reservation) bool {
	b := cfg.ReserveAfterS
	dw, deadline := b, 2*b
	switch {
	case cfg.ReserveLeadS == LeadHalfBound:
		dw, deadline = b/2, b
	case cfg.ReserveLeadS > 0:
		dw, deadline = max(b-cfg.ReserveLeadS, 0), b
	}
	late := func(w float64) bool { return w >= deadline+lateBounds*b }
	holderLate := late(s.Now - r.DueS + dw)
	return slices.ContainsFunc(s.Jobs, func(j Job) bool {
		w := waitedS(&j, s.Now)
		due := j.State == Pending && j.ID != r.JobID && j.GPUs > 1 && w >= dw
		earlier := s.Now-w+dw < r.DueS
		switch {
		case !due:
			return false
		case late(w) || holderLate:
			return late(w) && (!holderLate || earlier)
		}
		return j.GPUs > r.Count || j.GPUs == r.Count && earlier
	})
}

// lentGaveWay tells whether job id, which held a reservation, may have
// given it way as rsvScanEnd says, to be reserved afresh or not at all:
// under fair share it asks more GPUs than its team's guarantee and has
// run, in all, its bound or the minimum runtime, whichever is longer (its
// lend), and a job of several GPUs that has not waits too.
func lentGaveWay(s Snapshot, cfg Config, id int64) bool {
	guarantee := map[string]int{}
	for _, t := range s.Teams {
		guarantee[t.Name] = t.GuaranteeGPUs
	}
	minRun := cfg.MinRuntimeS
	if minRun == 0 {
		minRun = DefaultMinRuntimeS
	}
	lent := func(j *Job) bool {
		return len(s.Teams) > 0 && j.ExecutedS > 0 && j.ExecutedS >= max(minRun, cfg.ReserveAfterS) && jobGPUs(j) > guarantee[j.Team]
	}
	i := slices.IndexFunc(s.Jobs, func(j Job) bool { return j.ID == id })
	if i < 0 || !lent(&s.Jobs[i]) {
		return false
	}
	return slices.ContainsFunc(s.Jobs, func(j Job) bool { return j.State == Pending && j.GPUs > 1 && !lent(&j) })
}

// TestReservationDeadline: a reserved job that has waited its bound again
// since it became due (its deadline, twice its bound in all) takes its
// GPUs, under a preemptive policy, from any batch job, and the jobs
// ranked above it do not take them first; before its deadline, a
// session ranked above it starts on them only if its limit ends it by
// the deadline (issue 30). One machine of 8, bound 300 s; job 10 (8
// GPUs) was submitted at 100, due at 400, its deadline 700, and holds a
// reservation on the machine.
func TestReservationDeadline(t *testing.T) {
	all := on("node-0", span(0, 8)...)
	kept := []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 1300, DueS: 400}}
	cases := []struct {
		name     string
		now      float64
		handover float64
		jobs     []Job
		starts   []int64
		preempts []int64
		rsv      []Reservation
	}{
		{
			name: "past its deadline: a job ranked above it is preempted, and one waiting above it does not take its free GPUs",
			now:  2000,
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 50, on("node-0", 0), ranFrom(1000, 2000)),
				pend(12, 1, 60),
			},
			starts:   []int64{10},
			preempts: []int64{11},
		},
		{
			name:     "a handover before its deadline: it takes its GPUs then, so that they are free by it",
			now:      660,
			handover: 50,
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 50, on("node-0", 0), ranFrom(600, 660)),
			},
			starts:   []int64{10},
			preempts: []int64{11},
		},
		{
			name:     "not yet a handover before its deadline",
			now:      640,
			handover: 50,
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 50, on("node-0", 0), ranFrom(600, 640)),
			},
			rsv: []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 700, DueS: 400}},
		},
		{
			name: "past its deadline, held up by a session: the jobs above it use the free GPUs",
			now:  2000,
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 50, on("node-0", 0), ranFrom(1000, 2000), session, limit(1500)),
				pend(12, 1, 60),
			},
			starts: []int64{12},
			// kept past its start: "expected free now"
			rsv: []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 2000, DueS: 400}},
		},
		{
			name: "before its deadline: a session above it that would end after it waits, a shorter one and a batch job start",
			now:  500,
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 40, on("node-0", 0), ranFrom(300, 500), limit(1000)),
				pend(12, 1, 60, session, limit(400)), // would end at 900
				pend(13, 1, 70, session, limit(150)), // ends by 650
				pend(14, 1, 80),
			},
			starts: []int64{13, 14},
			rsv:    []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 1300, DueS: 400}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Policy: "tiresias-l", ReserveAfterS: 300, HandoverS: tc.handover}
			s := Snapshot{Now: tc.now, Nodes: nodes(8), Jobs: tc.jobs, Reservations: kept}
			d := mustNew(t, cfg).Schedule(s)
			if !sameIDs(startIDs(d), tc.starts) {
				t.Errorf("starts %v, want %v", startIDs(d), tc.starts)
			}
			if !sameIDs(preemptIDs(d), tc.preempts) {
				t.Errorf("preempts %v, want %v", preemptIDs(d), tc.preempts)
			}
			for _, p := range d.Preempts {
				if !strings.Contains(p.Reason, "preempted for job 10, which had its GPUs reserved once it waited past its bound and has now waited its bound again") {
					t.Errorf("preemption %+v: want the deadline's reason", p)
				}
			}
			if !reflect.DeepEqual(d.Reservations, tc.rsv) {
				t.Errorf("reservations %+v, want %+v", d.Reservations, tc.rsv)
			}
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Error(joinProblems(p))
			}
			if p := reservationProblems(mustNew(t, cfg), s); len(p) > 0 {
				t.Error(joinProblems(p))
			}
			if at := 700 - tc.handover; tc.now < at && len(d.Starts) == 0 && d.Recheck > at {
				t.Errorf("recheck %v, want one by the deadline less the handover, %v", d.Recheck, at)
			}
		})
	}
}

// TestReservationPastDeadlineLentByGuarantee: under fair share, a
// reservation past its deadline whose GPUs are free or held by the other
// team's jobs that started on them once it was due takes them, though a
// job of that team within its guarantee waits: the free GPUs are held off
// that job, and its wait stops no lending (else the borrower was only
// reserved, pass after pass, and the GPUs idled for ever: the simulator
// stopped with jobs unfinished on mixed-sessions).
func TestReservationPastDeadlineLentByGuarantee(t *testing.T) {
	teams := []Team{{Name: "vision", GuaranteeGPUs: 4}, {Name: "nlp", GuaranteeGPUs: 4}}
	vision, nlp := teamOf("vision"), teamOf("nlp")
	cfg := Config{Policy: "tiresias-l", ReserveAfterS: 300}
	// Job 20, nlp's, due since 300, its deadline 600; vision's jobs 1 and
	// 2 started on its GPUs at 400, having waited their bound; job 12,
	// vision's, waits within its guarantee and ranks above job 20.
	s := Snapshot{Now: 700, Nodes: nodes(8), Teams: teams,
		Jobs: []Job{
			pend(20, 8, 0, nlp),
			run(1, 0, on("node-0", 0), vision, ranFrom(400, 700)),
			run(2, 0, on("node-0", 1), vision, ranFrom(400, 700)),
			pend(12, 1, 0, vision),
		},
		Reservations: []Reservation{{JobID: 20, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 650, DueS: 300}},
	}
	d := mustNew(t, cfg).Schedule(s)
	if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
		t.Fatal(joinProblems(p))
	}
	sc := mustNew(t, cfg)
	if p := append(fairProblems(sc, s, cfg, d), reservationProblems(sc, s)...); len(p) > 0 {
		t.Fatal(joinProblems(p))
	}
	var starts, preempts []int64
	for _, st := range d.Starts {
		starts = append(starts, st.JobID)
	}
	for _, p := range d.Preempts {
		preempts = append(preempts, p.JobID)
		if p.Reclaim || !strings.Contains(p.Reason, "takes them back, once, even from a team's guaranteed work") ||
			!strings.HasSuffix(p.Reason, "team vision may reclaim the GPUs job 20 borrows from it once it has run 600 s") {
			t.Errorf("preemption %+v: want one for the reservation past its deadline, lent by vision's guarantee", p)
		}
	}
	slices.Sort(preempts)
	if !slices.Equal(starts, []int64{20}) || !slices.Equal(preempts, []int64{1, 2}) {
		t.Errorf("starts %v, preempts %v; want [20], [1 2]", starts, preempts)
	}
	// Vision lent its guarantee: its jobs go back first in their queue.
	first := 0
	for _, qc := range d.QueueChanges {
		if (qc.JobID == 1 || qc.JobID == 2) && strings.Contains(qc.Reason, "back at the head of queue 0's line") {
			first++
		}
	}
	if first != 2 {
		t.Errorf("queue changes %+v: want jobs 1 and 2 back at the head of their queue", d.QueueChanges)
	}
}

// TestReservationBackfillNearDeadline: a job that would start on reserved
// GPUs as a preemptible backfill, or as a job ranked above the holder,
// does not when the reservation's deadline would take them within
// minBackfillS (less the handover): it would be preempted within seconds
// of its start. Job 10 (8 GPUs, due at 400) has its deadline at 700; job
// 14 (1 GPU) arrives after it, job 13 before.
func TestReservationBackfillNearDeadline(t *testing.T) {
	all := on("node-0", span(0, 8)...)
	kept := []Reservation{{JobID: 10, GPUs: all, Count: 8, FromS: 700, DueS: 400}}
	cases := []struct {
		name     string
		now      float64
		handover float64
		starts   []int64
	}{
		{"40 s before the deadline: it backfills", 660, 0, []int64{14}},
		{"30 s before the deadline: it backfills", 670, 0, []int64{14}},
		{"20 s before the deadline: it waits", 680, 0, nil},
		{"40 s before the deadline, a handover of 20 s: it waits", 660, 20, nil},
		{"1 s before the deadline: it waits", 699, 0, nil},
		// Job 13, submitted before job 10, ranks above it: it may use
		// the reserved GPUs before the deadline, to be preempted at it,
		// but for the last minute.
		{"ranked above it, 40 s before the deadline: it starts", 660, 0, []int64{13}},
		{"ranked above it, 20 s before the deadline: it waits", 680, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Policy: "tiresias-l", ReserveAfterS: 300, HandoverS: tc.handover}
			other := pend(14, 1, 200)
			if strings.HasPrefix(tc.name, "ranked above") {
				other = pend(13, 1, 60)
			}
			s := Snapshot{Now: tc.now, Nodes: nodes(8), Reservations: kept, Jobs: []Job{
				pend(10, 8, 100),
				run(11, 50, on("node-0", 0), ranFrom(600, tc.now)),
				other,
			}}
			d := mustNew(t, cfg).Schedule(s)
			if !sameIDs(startIDs(d), tc.starts) {
				t.Errorf("starts %v, want %v", startIDs(d), tc.starts)
			}
			if len(d.Preempts) > 0 {
				t.Errorf("preempts %v, want none", preemptIDs(d))
			}
			if len(d.Reservations) != 1 || d.Reservations[0].JobID != 10 {
				t.Errorf("reservations %+v, want job 10's", d.Reservations)
			}
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Error(joinProblems(p))
			}
			if p := reservationProblems(mustNew(t, cfg), s); len(p) > 0 {
				t.Error(joinProblems(p))
			}
		})
	}
}

// TestReservationStartedNotPreempted: a job of several GPUs that started
// after waiting its bound is not preempted by the policy for a job of its
// team while reservations are on: preempted, it would be due again at
// once and take its GPUs back past its deadline (issue 30: under
// tiresias-g an 8-GPU job went back and forth with 1-GPU jobs, runs cut
// every few seconds). Without reservations the policy preempts it as
// before.
//
// With a lead (serve's default: half the bound) a job is due at half its
// bound and must start by its bound, less the handover: one that started
// then, due but short of its bound, is protected as well. Before, it was
// not: live, a 4-GPU job that its reservation started 5 s before its
// bound was preempted 55 s later by a new job of its team, due again at
// once, and took its GPUs back from the jobs that had taken them.
func TestReservationStartedNotPreempted(t *testing.T) {
	for _, tc := range []struct {
		policy  string
		bound   float64
		lead    float64
		waited  float64 // before it started
		preempt bool
	}{
		{"tiresias-g", 0, 0, 900, true},
		{"tiresias-g", 300, 0, 900, false},
		{"tiresias-l", 0, 0, 900, true},
		{"tiresias-l", 300, 0, 900, false},
		{"tiresias-l", 300, 0, 200, true},              // not due when it started
		{"tiresias-l", 300, LeadHalfBound, 200, false}, // due at 150, its bound 300
		{"tiresias-g", 300, LeadHalfBound, 200, false},
		{"tiresias-l", 300, LeadHalfBound, 100, true}, // not yet due
	} {
		t.Run(fmt.Sprintf("%s, bound %v, lead %v, waited %v", tc.policy, tc.bound, tc.lead, tc.waited), func(t *testing.T) {
			cfg := Config{Policy: tc.policy, ReserveAfterS: tc.bound, ReserveLeadS: tc.lead}
			// Job 20 waited, then ran 500 s on 8 GPUs: 4,000 GPU-s,
			// past 2D-LAS's first threshold (3,250) and ranked below a
			// new job by the Gittins index.
			big := run(20, 900-tc.waited, on("node-0", span(0, 8)...), ranFrom(900, 1400), inQueue(1, 1306))
			s := Snapshot{Now: 1400, Nodes: nodes(8), Jobs: []Job{big, pend(21, 1, 1390)}}
			d := mustNew(t, cfg).Schedule(s)
			if got := slices.Equal(preemptIDs(d), []int64{20}); got != tc.preempt {
				t.Errorf("preempts %v, starts %v; want job 20 preempted: %v", preemptIDs(d), startIDs(d), tc.preempt)
			}
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Error(joinProblems(p))
			}
		})
	}
}

// TestReservationLentGivesWay: under fair share (vision and nlp, 4 of 8
// GPUs each, bound 300 s, one reservation), job 20, vision's 8-GPU job,
// ran 30 s on nlp's lent GPUs and was reclaimed; it holds the
// reservation, while job 30, nlp's 8-GPU job, has never run and is due
// too (since 800, its deadline 1,100). Each team's jobs within its
// guarantee hold the machine, started at 950 once they had waited their
// bound. Job 20 may take no more of nlp's guaranteed work, so its
// reservation goes to job 30, which may, once, at its deadline (issue
// 30: on mixed-8gpu with a 30 s minimum runtime, a job due behind a
// reclaimed one waited 2,354 s for a bound of 300 s). Without job 30,
// job 20 keeps it. Live, job 20 had been demoted to queue 1 and job 30,
// ranked above it, got no reservation, its GPUs being kept for job 20.
func TestReservationLentGivesWay(t *testing.T) {
	teams := []Team{{Name: "vision", GuaranteeGPUs: 4}, {Name: "nlp", GuaranteeGPUs: 4}}
	vision, nlp := teamOf("vision"), teamOf("nlp")
	cfg := Config{Policy: "tiresias-l", ReserveAfterS: 300, MinRuntimeS: 30}
	all := on("node-0", span(0, 8)...)
	busy := []Job{
		run(1, 600, on("node-0", 0, 1), vision, ranFrom(950, 1000)),
		run(2, 600, on("node-0", 2, 3), vision, ranFrom(950, 1000)),
		run(3, 600, on("node-0", 4, 5), nlp, ranFrom(950, 1000)),
		run(4, 600, on("node-0", 6, 7), nlp, ranFrom(950, 1000)),
	}
	// Job 20 has had its lend once it has run its bound (300 s, longer
	// than the minimum runtime): a reclaim leaves it that long.
	lent := pend(20, 8, 0, vision, served(300))
	demoted := pend(20, 8, 0, vision, served(500)) // 4,000 GPU-s: queue 1
	fresh := pend(30, 8, 500, nlp)
	kept := []Reservation{{JobID: 20, GPUs: all, Count: 8, FromS: 1100, DueS: 300}}
	for _, tc := range []struct {
		name string
		jobs []Job
		want int64
	}{
		{"a due job that has not had its lend takes it", append(slices.Clone(busy), lent, fresh), 30},
		// Demoted, job 20 ranks below job 30, which the walk decides
		// first: the GPUs job 20 kept are not kept from it.
		{"ranked above it, too", append(slices.Clone(busy), demoted, fresh), 30},
		{"alone, it keeps it", append(slices.Clone(busy), lent), 20},
		// Cut 30 s into its run (by another reservation's deadline, or
		// its own team), job 20 has not had its lend: it keeps the
		// reservation, due before job 30.
		{"cut before its lend, it keeps it", append(slices.Clone(busy), pend(20, 8, 0, vision, served(30)), fresh), 20},
		// Job 21 has had its lend too: job 20 keeps the reservation,
		// and job 21's wait does not say a job that has not came first.
		{"beside another that has had its lend, it keeps it", append(slices.Clone(busy), lent, pend(21, 8, 100, nlp, served(300))), 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Now: 1000, Nodes: nodes(8), Teams: teams, Jobs: tc.jobs, Reservations: kept}
			sc := mustNew(t, cfg)
			d := sc.Schedule(s)
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Fatal(joinProblems(p))
			}
			if p := append(fairProblems(sc, s, cfg, d), reservationProblems(sc, s)...); len(p) > 0 {
				t.Fatal(joinProblems(p))
			}
			for _, w := range d.Waits {
				t.Logf("job %d: %s", w.JobID, w.Reason)
			}
			if len(d.Starts)+len(d.Preempts) > 0 || len(d.Reservations) != 1 || d.Reservations[0].JobID != tc.want {
				t.Fatalf("reservations %+v, want job %d's; starts %v, preempts %v", d.Reservations, tc.want, startIDs(d), preemptIDs(d))
			}
			// The job that gave its reservation way says why; no other
			// does.
			for _, w := range d.Waits {
				said := strings.Contains(w.Reason, "it has run once on GPUs another team lent it")
				if want := w.JobID == 20 && tc.want != 20; said != want {
					t.Errorf("job %d's wait %q: says it gave way %v, want %v", w.JobID, w.Reason, said, want)
				}
			}
		})
	}
}

// TestReservationKeptBarsJoinNearDeadline: job 10 (8 GPUs, due at 300,
// its deadline 600) holds a kept reservation of the machine; job 1,
// ranked above it, holds GPUs 0-2 (its limit ends it at 1,300), so job 10
// does not start yet; jobs 2 and 3 share GPU 7, jobs 20-23 the rest. Job 5, a sharing job of one
// GPU submitted before job 10 and ranked above it, may join GPU 7 well
// before the deadline, as it may start on a free reserved GPU, but not
// in its last 30 s (minBackfillS), where it would be preempted within
// seconds (issue 30: live, sharing jobs joined a reserved GPU in the pass
// before the deadline and were preempted 9.8 s later).
func TestReservationKeptBarsJoinNearDeadline(t *testing.T) {
	sh := shares(8000, 2000)
	cfg := Config{Policy: "tiresias-l", ReserveAfterS: 300}
	for _, tc := range []struct {
		now  float64
		join bool
	}{{480, true}, {580, false}} {
		t.Run(fmt.Sprintf("at %v", tc.now), func(t *testing.T) {
			s := Snapshot{Now: tc.now, Nodes: nodes(8), Jobs: []Job{
				run(1, 0, on("node-0", 0, 1, 2), ranFrom(290, tc.now), limit(1010)),
				run(2, 0, on("node-0", 7), ranFrom(400, tc.now), sh),
				run(3, 0, on("node-0", 7), ranFrom(450, tc.now), sh),
				pend(5, 1, -10, sh),
				pend(10, 8, 0),
			}, Reservations: []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: 1300, DueS: 300}}}
			// Only GPU 7, shared, is left to job 5: jobs 20-23 hold the
			// others.
			for k := range 4 {
				s.Jobs = append(s.Jobs, run(int64(20+k), 0, on("node-0", 3+k), ranFrom(450, tc.now)))
			}
			sc := mustNew(t, cfg)
			d := sc.Schedule(s)
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Fatal(joinProblems(p))
			}
			st, ok := startOf(d, 5)
			if joined := ok && slices.Contains(st.GPUs, gpu.Ref{Node: "node-0", Index: 7}); joined != tc.join {
				w, _ := waitOf(d, 5)
				t.Errorf("job 5 joined the reserved shared GPU: %v, want %v (starts %v, preempts %v, its wait %q)", joined, tc.join, startIDs(d), preemptIDs(d), w.Reason)
			}
		})
	}
}

// TestReservationDeadlineTakesFromJobsShortOfTheirBound: with a lead
// (bound 300 s, due at 150), job 10, 8 GPUs, past its deadline, takes its
// GPUs from job 11, 4 GPUs, which started due but short of its bound,
// when job 11's deadline did not come first: only a job that had waited
// its whole bound when it started (wasDue), or one that started due
// before job 10 in the order of reservations (dueFirst: the earliest
// deadline first), is spared a deadline. Sparing every job that started
// due, live, the demo's 8-GPU job waited for the 2- and 4-GPU jobs that
// had started due after it, 170 s for a bound of 120 s, where it started
// at 115 s.
func TestReservationDeadlineTakesFromJobsShortOfTheirBound(t *testing.T) {
	const now = 420
	cfg := Config{Policy: "tiresias-l", ReserveAfterS: 300, ReserveLeadS: LeadHalfBound}
	rsv := []Reservation{{JobID: 10, GPUs: on("node-0", span(0, 8)...), Count: 8, FromS: now, DueS: 250}}
	for _, tc := range []struct {
		name     string
		jobs     []Job
		preempts []int64
	}{
		{
			// Job 10 was due at 250 and its deadline was 400. Jobs 11
			// and 12 started before it was due, so that only its
			// deadline takes them, not their rank. Job 11 was due at
			// 250 too, its deadline 400, but job 10 comes first
			// (compareDue: the lower ID).
			name: "a job due as it was, short of its bound, and one not due",
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 100, on("node-0", span(0, 4)...), ranFrom(250, now)), // waited 150 s: due, short of its bound
				run(12, 0, on("node-0", span(4, 8)...), ranFrom(50, now)),    // waited 50 s: not due
			},
			preempts: []int64{11, 12},
		},
		{
			// Job 11 asks fewer GPUs, and its deadline, 300, came
			// before job 10's: job 10 comes first (compareDue).
			name: "one of fewer GPUs due before it",
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 0, on("node-0", span(0, 4)...), ranFrom(200, now)),
				run(12, 0, on("node-0", span(4, 8)...), ranFrom(50, now)),
			},
			preempts: []int64{11, 12},
		},
		{
			// Job 11, 8 GPUs too, waited 200 s: due at 150, its
			// deadline 300, before job 10's. It keeps its GPUs.
			name: "not one as big due before it",
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 0, on("node-0", span(0, 8)...), ranFrom(200, now)),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Now: now, Nodes: nodes(8), Reservations: rsv, Jobs: tc.jobs}
			d := mustNew(t, cfg).Schedule(s)
			if !sameIDs(preemptIDs(d), tc.preempts) {
				t.Errorf("preempts %v, want %v: job 10 is past its deadline", preemptIDs(d), tc.preempts)
			}
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Error(joinProblems(p))
			}
			if p := reservationProblems(mustNew(t, cfg), s); len(p) > 0 {
				t.Error(joinProblems(p))
			}
		})
	}
}

// TestCompareDue: the order in which jobs due are reserved (rule 9 of
// "Reservations"): under fair share those that have not had their lend
// first, then the jobs of more GPUs, then the earliest deadline, then
// the lowest ID.
func TestCompareDue(t *testing.T) {
	cases := []struct {
		name string
		a, b rsvDue
		want int
	}{
		{"not lent first", rsvDue{gpus: 2, deadline: 900, id: 9}, rsvDue{lent: true, gpus: 8, deadline: 100, id: 1}, -1},
		{"then the late", rsvDue{late: true, gpus: 2, deadline: 100, id: 9}, rsvDue{gpus: 8, deadline: 900, id: 1}, -1},
		{"the late by their deadline, whatever their size", rsvDue{late: true, gpus: 2, deadline: 100, id: 9}, rsvDue{late: true, gpus: 8, deadline: 200, id: 1}, -1},
		{"then the bigger", rsvDue{gpus: 8, deadline: 900, id: 9}, rsvDue{gpus: 4, deadline: 100, id: 1}, -1},
		{"then the earlier deadline", rsvDue{gpus: 4, deadline: 100, id: 9}, rsvDue{gpus: 4, deadline: 900, id: 1}, -1},
		{"then the lower ID", rsvDue{gpus: 4, deadline: 100, id: 1}, rsvDue{gpus: 4, deadline: 100, id: 9}, -1},
		{"the same", rsvDue{gpus: 4, deadline: 100, id: 1}, rsvDue{gpus: 4, deadline: 100, id: 1}, 0},
	}
	for _, tc := range cases {
		if got := compareDue(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: compareDue(%+v, %+v) = %d, want %d", tc.name, tc.a, tc.b, got, tc.want)
		}
		if got := compareDue(tc.b, tc.a); got != -tc.want {
			t.Errorf("%s, swapped: compareDue = %d, want %d", tc.name, got, -tc.want)
		}
	}
}

// TestReservationNotTakenByAJobTooBig: a job due that asks more GPUs
// than the schedulable machines it may use have (all of them, or those
// it does not avoid) can hold no reservation; first in the order of the
// jobs due by its size, it must not keep the due job ranked above it
// from the one reservation (rsvScan).
func TestReservationNotTakenByAJobTooBig(t *testing.T) {
	const now = 1000
	for _, big := range []Job{
		pend(11, 16, 5), // ranked below job 10, and bigger than the machines
		pend(11, 8, 5, func(j *Job) { j.AvoidNodes = []string{"node-1", "node-1"} }), // 8 GPUs, but it avoids node-1
	} {
		s := Snapshot{Now: now, Nodes: nodes(4, 4),
			Jobs: []Job{
				run(1, 0, on("node-0", 0, 1, 2, 3), ranFrom(500, now), limit(1000)),
				run(2, 0, on("node-1", 0, 1, 2, 3), ranFrom(500, now), limit(900)),
				pend(10, 4, 0),
				big,
			}}
		cfg := Config{Policy: "tiresias-l", ReserveAfterS: 300, Thresholds: []float64{1e7}}
		d := mustNew(t, cfg).Schedule(s)
		want := []Reservation{{JobID: 10, GPUs: on("node-1", 0, 1, 2, 3), Count: 4, FromS: 1400, DueS: 300}}
		if !reflect.DeepEqual(d.Reservations, want) {
			t.Errorf("with job 11 of %d GPUs avoiding %v: reservations %+v, want %+v", big.GPUs, big.AvoidNodes, d.Reservations, want)
		}
	}
}

// TestReservationLateFirst: the one reservation goes to the biggest job
// due, unless a smaller one is late, lateBounds bounds past its
// deadline: job 10 (2 GPUs, waiting since 0) against job 11 (8 GPUs,
// due since 900). With a bound of 100 s job 10's deadline was at 200 and
// it is late from 800; with a bound of 150 s, from 1,200.
func TestReservationLateFirst(t *testing.T) {
	const now = 1000
	for _, tc := range []struct {
		bound float64
		want  int64
	}{{100, 10}, {150, 11}} {
		s := Snapshot{Now: now, Nodes: nodes(4, 4),
			Jobs: []Job{
				run(1, 0, on("node-0", 0, 1, 2, 3), ranFrom(500, now), limit(1000)),
				run(2, 0, on("node-1", 0, 1, 2, 3), ranFrom(500, now), limit(900)),
				pend(10, 2, 0),
				pend(11, 8, now-2*tc.bound),
			}}
		cfg := Config{Policy: "tiresias-l", ReserveAfterS: tc.bound, Thresholds: []float64{1e7}}
		d := mustNew(t, cfg).Schedule(s)
		if len(d.Reservations) != 1 || d.Reservations[0].JobID != tc.want {
			t.Errorf("bound %v: reservations %+v, want job %d's", tc.bound, d.Reservations, tc.want)
		}
		other := int64(21 - tc.want)
		if w, _ := waitOf(d, other); !strings.Contains(w.Reason, "due for a reservation: jobs past their deadline by 6 bounds are reserved first") {
			t.Errorf("bound %v: job %d waits with %q, want it to say why it has no reservation", tc.bound, other, w.Reason)
		}
	}
}

// TestReservationNamesItsSessions: a reservation on GPUs that interactive
// sessions hold says so in its job's reason, by the sessions' IDs, since a
// session is never preempted for it and the job waits for it to end
// however long it runs; batch jobs on its GPUs, and sessions elsewhere,
// are not named.
func TestReservationNamesItsSessions(t *testing.T) {
	asSession := func(j *Job) { j.Class = ClassSession }
	cases := []struct {
		name string
		jobs []Job
		want string // the reason's end, after the reservation's clause
	}{
		{
			name: "one session",
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 50, on("node-0", 3), ranFrom(200, 500), asSession),
				run(12, 60, on("node-0", 0), ranFrom(200, 500)),
			},
			want: "; session 11 holds one of them: a session is never preempted, so the job waits for it to end",
		},
		{
			name: "three sessions, one with interactive priority",
			jobs: []Job{
				pend(10, 8, 100),
				run(21, 50, on("node-0", 1), ranFrom(200, 500), asSession),
				run(13, 50, on("node-0", 5), ranFrom(200, 500), session),
				run(12, 60, on("node-0", 2), ranFrom(200, 500), asSession, limit(4000)),
			},
			want: "; sessions 12, 13 and 21 hold some of them: a session is never preempted, so the job waits for them to end",
		},
		{
			name: "two machines, the sessions on GPUs it does not reserve",
			jobs: []Job{
				pend(10, 8, 100),
				run(11, 50, on("node-0", 3), ranFrom(200, 500), asSession),
				run(12, 60, on("node-0", 0, 1, 2), ranFrom(200, 500), limit(400)),
				run(14, 50, on("node-1", 7), ranFrom(200, 500), asSession),
				run(15, 60, on("node-1", 0, 1, 2, 3, 4, 5, 6), ranFrom(200, 500), limit(100000)),
			},
			want: "GPUs node-0:0 and node-1:0-6 reserved for it, expected free in 200 s",
		},
		{
			name: "batch jobs only",
			jobs: []Job{
				pend(10, 8, 100),
				run(12, 60, on("node-0", 0), ranFrom(200, 500)),
			},
			want: "reserved for it, expected free in ",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := nodes(8)
			if strings.HasPrefix(tc.name, "two machines") {
				n = nodes(8, 8)
			}
			cfg := Config{Policy: "tiresias-l", ReserveAfterS: 300}
			s := Snapshot{Now: 500, Nodes: n, Jobs: tc.jobs}
			d := mustNew(t, cfg).Schedule(s)
			if len(d.Reservations) != 1 || d.Reservations[0].JobID != 10 {
				t.Fatalf("reservations %+v, want one for job 10", d.Reservations)
			}
			w, ok := waitOf(d, 10)
			if !ok {
				t.Fatal("job 10 is not explained")
			}
			clause := d.Reservations[0].Clause(s.Now)
			at := strings.Index(w.Reason, clause)
			if at < 0 {
				t.Fatalf("reason %q does not hold the reservation's clause %q", w.Reason, clause)
			}
			rest := w.Reason[at+len(clause):]
			if strings.HasPrefix(tc.want, "; session") {
				if !strings.HasPrefix(rest, tc.want) {
					t.Errorf("reason %q: after the clause %q, want %q", w.Reason, rest, tc.want)
				}
			} else if strings.Contains(w.Reason, "session") || !strings.Contains(w.Reason, tc.want) {
				t.Errorf("reason %q: want %q and no session named", w.Reason, tc.want)
			}
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Error(joinProblems(p))
			}
			// The simulator's passes build no reasons, and decide the same.
			cfg.OmitWaits = true
			if o := mustNew(t, cfg).Schedule(s); len(o.Waits) != 0 || !reflect.DeepEqual(o.Reservations, d.Reservations) {
				t.Errorf("with OmitWaits: %d waits, reservations %+v; want none and %+v", len(o.Waits), o.Reservations, d.Reservations)
			}
		})
	}
}
