package sim

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// teamsRun is what the table of docs/scheduling.md ("Reservations under
// fair share") reads of one replay of a mixed trace with two teams.
type teamsRun struct {
	bigMax, bigP99 float64
	// lenderMax is the longest wait of a job that fitted within its
	// team's guarantee (TeamResult.MaxWaitWithinS), over the teams that
	// own no 8-GPU job (every team when both do).
	lenderMax float64
	// restJCT is the average JCT of every job but the 8-GPU ones.
	restJCT float64
	// sessionPreemptions is how often sessions were preempted.
	sessionPreemptions int
}

// mixedTeams are the two teams of the mixed traces: 4 GPUs each of 8.
var mixedTeams = []trace.Team{{Name: "vision", GuaranteeGPUs: 4}, {Name: "nlp", GuaranteeGPUs: 4}}

// replayTeams replays jobs on one machine of 8 GPUs under tiresias-l and
// fair share between mixedTeams, reserving after bound (0: never).
func replayTeams(t *testing.T, jobs []trace.Job, bound, lead float64) teamsRun {
	t.Helper()
	cfg := Config{
		Sched: sched.Config{Policy: "tiresias-l", ReserveAfterS: bound, ReserveLeadS: lead, OmitWaits: true},
		Nodes: []trace.Node{{Name: "node-0", GPUs: 8}},
		Teams: mixedTeams,
	}
	s, err := newSimulator(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := s.result()
	if r.Finished != len(jobs) {
		t.Fatalf("%d of %d jobs finished", r.Finished, len(jobs))
	}
	var out teamsRun
	for _, p := range r.Pending {
		if p.GPUs == 8 {
			out.bigMax, out.bigP99 = p.MaxS, p.P99S
		}
	}
	bigTeams := map[string]bool{}
	sum, n := 0.0, 0
	for i := range s.jobs {
		j := &s.jobs[i]
		if j.tj.GPUs == 8 {
			bigTeams[j.tj.Team] = true
			continue
		}
		sum += j.finish - j.tj.Submit
		n++
	}
	out.restJCT = sum / float64(n)
	if r.Classes != nil {
		out.sessionPreemptions = r.Classes.SessionPreemptions
	}
	for _, tr := range r.Teams {
		if !bigTeams[tr.Team] || len(bigTeams) == len(r.Teams) {
			out.lenderMax = math.Max(out.lenderMax, tr.MaxWaitWithinS)
		}
	}
	return out
}

// mixedTeamTraces are the mixed traces with two teams, and 5 jittered
// copies of each (trace.Jittered, seeds 1 to 5, 60 s, 1.25): mixed-8gpu's
// and mixed-spec's jobs, which name no team, split evenly between them.
func mixedTeamTraces(t *testing.T) (names []string, traces [][]trace.Job) {
	t.Helper()
	split := func(path string) []trace.Job {
		tr, err := trace.ReadFile(path, trace.FormatNative)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trace.AssignTeams(tr.Jobs, "vision:50,nlp:50"); err != nil {
			t.Fatal(err)
		}
		return tr.Jobs
	}
	for _, base := range []struct {
		name string
		jobs []trace.Job
	}{{"mixed-8gpu", split(mixedTrace)}, {"mixed-spec", split(specTrace)}, {"mixed-sessions", readMixedSessions(t)}} {
		names, traces = append(names, base.name), append(traces, base.jobs)
		for seed := 1; seed <= 5; seed++ {
			names = append(names, fmt.Sprintf("%s seed %d", base.name, seed))
			traces = append(traces, trace.Jittered(base.jobs, uint64(seed), 60, 1.25))
		}
	}
	return names, traces
}

// TestMixedTeamsReservations replays the mixed traces with two teams of 4
// GPUs each, without and with reservations (bound 900 s), and logs the
// table of docs/scheduling.md ("Reservations under fair share"). With
// reservations the 8-GPU jobs wait less on every trace and no session is
// preempted; on mixed-8gpu, mixed-spec and their copies none is pending
// more than twice the bound, and no job within its team's guarantee waits
// more than the bound. On mixed-spec that holds because a reservation past
// its deadline takes its GPUs back from the other team's jobs that started
// on them once it was due, even those that had waited their bound (rule 5
// of "Reservations under fair share").
func TestMixedTeamsReservations(t *testing.T) {
	names, traces := mixedTeamTraces(t)
	var table strings.Builder
	for i, jobs := range traces {
		off := replayTeams(t, jobs, 0, 0)
		on := replayTeams(t, jobs, mixedBound, 0)
		lead := replayTeams(t, jobs, mixedBound, sched.LeadHalfBound)
		fmt.Fprintf(&table, "| %s | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f |\n", names[i],
			off.bigMax, on.bigMax, lead.bigMax, off.bigP99, on.bigP99, lead.bigP99, off.lenderMax, on.lenderMax, lead.lenderMax, off.restJCT, on.restJCT, lead.restJCT)
		// The lead (rule 7 of "Reservations"): the bound is when the job
		// must start, at no cost to the rest beyond 5%.
		if lead.restJCT > 1.05*on.restJCT {
			t.Errorf("%s: the rest's average JCT is %.0f s with the lead, %.0f s without: more than 5%% worse", names[i], lead.restJCT, on.restJCT)
		}
		if lead.sessionPreemptions > 0 {
			t.Errorf("%s: sessions preempted %d times with the lead", names[i], lead.sessionPreemptions)
		}
		if on.bigMax >= off.bigMax {
			t.Errorf("%s: the longest 8-GPU pending is %.0f s with reservations, %.0f s without", names[i], on.bigMax, off.bigMax)
		}
		if on.sessionPreemptions > 0 {
			t.Errorf("%s: sessions preempted %d times", names[i], on.sessionPreemptions)
		}
		if strings.HasPrefix(names[i], "mixed-sessions") {
			continue // sessions without a limit, never preempted, hold the machine for an hour or more
		}
		if lead.bigMax > on.bigMax {
			t.Errorf("%s: the longest 8-GPU pending is %.0f s with the lead, %.0f s without", names[i], lead.bigMax, on.bigMax)
		}
		if on.bigMax > 2*mixedBound {
			t.Errorf("%s: an 8-GPU job is pending %.0f s, more than twice the bound of %.0f s", names[i], on.bigMax, mixedBound)
		}
		if on.lenderMax > mixedBound {
			t.Errorf("%s: a job within its team's guarantee waited %.0f s, more than the bound of %.0f s", names[i], on.lenderMax, mixedBound)
		}
	}
	t.Logf("trace | 8-GPU max pending s | 8-GPU p99 pending s | lender's max wait within guarantee s | rest avg JCT s (without / with / with the lead of half the bound)\n%s", table.String())
}

// firstStarts records each job's first start.
type firstStarts map[int64]float64

func (firstStarts) Pass(sched.Snapshot, sched.Decisions) {}
func (f firstStarts) Started(id int64, at float64) {
	if _, ok := f[id]; !ok {
		f[id] = at
	}
}
func (firstStarts) Finished(int64, float64, float64) {}

// TestMixedTeamsReclaimedHolder replays mixed-8gpu and 5 jittered copies
// with two teams of 4 GPUs, serve's bound (300 s, reserved at half of
// it) and the demo's 30 s minimum runtime, under which an 8-GPU job runs
// 30 s on the other team's GPUs and is reclaimed. Such a job has had its
// lend and gives its reservation way to the next 8-GPU job due ("A job
// that has had its lend gives its reservation way"): no 8-GPU job waits
// more than three times the bound for its first start. Before, the
// reclaimed job kept the one reservation and the next waited up to
// 2,354 s.
func TestMixedTeamsReclaimedHolder(t *testing.T) {
	names, traces := mixedTeamTraces(t)
	const bound = 300
	for k, name := range names {
		if !strings.HasPrefix(name, "mixed-8gpu") {
			continue
		}
		starts := firstStarts{}
		cfg := Config{
			Sched: sched.Config{Policy: "tiresias-l", ReserveAfterS: bound, ReserveLeadS: sched.LeadHalfBound,
				MinRuntimeS: 30, OmitWaits: true},
			Nodes:    []trace.Node{{Name: "node-0", GPUs: 8}},
			Teams:    mixedTeams,
			Observer: starts,
		}
		r, err := Run(context.Background(), traces[k], cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Finished != len(traces[k]) {
			t.Fatalf("%s: %d of %d jobs finished", name, r.Finished, len(traces[k]))
		}
		longest, reclaimed := 0.0, 0
		for _, j := range traces[k] {
			if j.GPUs != 8 {
				continue
			}
			longest = math.Max(longest, starts[j.ID]-j.Submit)
		}
		for _, tr := range r.Teams {
			reclaimed += tr.Reclaims
		}
		t.Logf("%s: longest first wait of an 8-GPU job %.0f s; %d reclaims", name, longest, reclaimed)
		if reclaimed == 0 {
			t.Errorf("%s: no reclaim: the replay does not test a reclaimed holder", name)
		}
		if longest > 3*bound {
			t.Errorf("%s: an 8-GPU job waited %.0f s for its first start, more than 3 times the %d s bound", name, longest, bound)
		}
	}
}
