package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TestFairShareGolden runs the traces of testdata with teams and checks
// JCTs and per-team figures worked out by hand (docs/fair-share.md).
func TestFairShareGolden(t *testing.T) {
	cases := []struct {
		name, file, cluster string
		policy              string
		teams               string
		minRuntime          float64
		noFairShare         bool
		jct                 map[int64]float64
		preemptions         int
		teamsWant           []TeamResult
		fairness            float64 // when not 0
	}{
		{
			// vision's four jobs reach 3,250 GPU-s at 406.25 s and enter
			// queue 1 together: jobs 1 and 2 fill its guarantee, 3 and 4
			// borrow. nlp's jobs wait for 3 and 4 to have run 600 s, then
			// reclaim them (4 first, the lowest ranked) at 600 and run to
			// 1,600. At 900, 1 and 2 reach queue 2: within vision, 3 and
			// 4 (queue 1) now rank above them and take their GPUs, and run
			// to 900 + 9,400 = 10,300; 1 and 2 resume at 1,600 with 9,100
			// s to go, to 10,700.
			name: "reclaim after the minimum runtime", file: "fairshare.csv", cluster: "4x8",
			policy: "tiresias-l", teams: "vision:16,nlp:16",
			jct:         map[int64]float64{1: 10700, 2: 10700, 3: 10300, 4: 10300, 5: 1500, 6: 1500},
			preemptions: 4,
			teamsWant: []TeamResult{
				// vision borrows 16 GPUs over 0-600 and 1,600-10,300.
				{Team: "vision", GuaranteedGPUs: 16, Weight: 1, Jobs: 4, Finished: 4, AvgJCT: 10500, AvgPending: 500,
					GPUSeconds: 320000, BorrowedGPUSeconds: 16 * (600 + 8700), PreemptedByReclaim: 2, GuaranteeMet: 1},
				// nlp wants its 16 GPUs from 100 and gets them from 600
				// to 1,600: 1,000 of 1,500 s. Each job waits 500 s within
				// the guarantee: the minimum runtime less the 100 s the
				// borrowed jobs had run when nlp's arrived.
				{Team: "nlp", GuaranteedGPUs: 16, Weight: 1, Jobs: 2, Finished: 2, AvgJCT: 1500, AvgPending: 500,
					GPUSeconds: 16000, Reclaims: 2, GuaranteeMet: 1000.0 / 1500, WaitWithinS: 1000, MaxWaitWithinS: 500},
			},
			// Jain's index of 1 and 2/3: (5/3)^2 / (2 (1 + 4/9)).
			fairness: 25.0 / 26,
		},
		{
			// No minimum: nlp reclaims 3 and 4 on arrival, at 100, and
			// runs to 1,100. At 406.25 1 and 2 enter queue 1; 3 and 4,
			// still in queue 0, take their GPUs and run to 406.25 + 9,900;
			// 1 and 2 resume at 1,100 with 9,593.75 s to go.
			name: "reclaim at once without a minimum runtime", file: "fairshare.csv", cluster: "4x8",
			policy: "tiresias-l", teams: "vision:16,nlp:16", minRuntime: -1,
			jct:         map[int64]float64{1: 10693.75, 2: 10693.75, 3: 10306.25, 4: 10306.25, 5: 1000, 6: 1000},
			preemptions: 4,
		},
		{
			// Without fair share Tiresias preempts 3 and 4 for nlp once
			// they leave queue 0, at 406.25, and nlp runs to 1,406.25. At
			// 900 3 and 4 preempt 1 and 2 as above, and run to 900 +
			// 9,593.75; 1 and 2 resume at 1,406.25 with 9,100 s to go.
			name: "the same trace without fair share", file: "fairshare.csv", cluster: "4x8",
			policy: "tiresias-l", teams: "vision:16,nlp:16", noFairShare: true,
			jct:         map[int64]float64{1: 10506.25, 2: 10506.25, 3: 10493.75, 4: 10493.75, 5: 1306.25, 6: 1306.25},
			preemptions: 4,
			teamsWant: []TeamResult{
				{Team: "vision", GuaranteedGPUs: 16, Weight: 1, Jobs: 4, Finished: 4, AvgJCT: 10500, AvgPending: 500,
					GPUSeconds: 320000, BorrowedGPUSeconds: 16 * (406.25 + 9087.5), GuaranteeMet: 1},
				{Team: "nlp", GuaranteedGPUs: 16, Weight: 1, Jobs: 2, Finished: 2, AvgJCT: 1306.25, AvgPending: 306.25,
					GPUSeconds: 16000, GuaranteeMet: 1000 / 1306.25, WaitWithinS: 612.5, MaxWaitWithinS: 306.25},
			},
		},
		{
			// vision runs two jobs, one on nlp's idle guarantee; its
			// third waits for GPUs. nlp's job finds free GPUs at 1,500.
			name: "borrowing while a team is idle", file: "idle.csv", cluster: "2x8",
			policy: "fjf", teams: "vision:8,nlp:8",
			jct: map[int64]float64{1: 1000, 2: 1000, 3: 2000, 4: 500},
			teamsWant: []TeamResult{
				{Team: "vision", GuaranteedGPUs: 8, Weight: 1, Jobs: 3, Finished: 3, AvgJCT: 4000.0 / 3, AvgPending: 1000.0 / 3,
					GPUSeconds: 24000, BorrowedGPUSeconds: 8000},
				{Team: "nlp", GuaranteedGPUs: 8, Weight: 1, Jobs: 1, Finished: 1, AvgJCT: 500, GPUSeconds: 4000},
			},
		},
		{
			// Each job needs 2 GPUs beyond its team's guarantee: it
			// borrows, and a borrower never reclaims. b's job waits for
			// a's to end; nobody is preempted.
			name: "no ping-pong between two borrowers", file: "straddle.csv", cluster: "1x8",
			policy: "tiresias-l", teams: "a:4,b:4",
			jct: map[int64]float64{1: 1000, 2: 1990},
			teamsWant: []TeamResult{
				{Team: "a", GuaranteedGPUs: 4, Weight: 1, Jobs: 1, Finished: 1, AvgJCT: 1000, GPUSeconds: 6000, BorrowedGPUSeconds: 2000},
				{Team: "b", GuaranteedGPUs: 4, Weight: 1, Jobs: 1, Finished: 1, AvgJCT: 1990, AvgPending: 990, GPUSeconds: 6000, BorrowedGPUSeconds: 2000},
			},
		},
		{
			// Without fair share b's job, in queue 0, preempts a's once a's
			// leaves it (3,250 GPU-s over 6 GPUs: 541.67 s).
			name: "the two borrowers without fair share", file: "straddle.csv", cluster: "1x8",
			policy: "tiresias-l", teams: "a:4,b:4", noFairShare: true,
			jct: map[int64]float64{1: 2000, 2: 3250.0/6 + 1000 - 10}, preemptions: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := trace.ReadFile("testdata/"+c.file, trace.FormatNative)
			if err != nil {
				t.Fatal(err)
			}
			teams, err := trace.ParseTeams(c.teams)
			if err != nil {
				t.Fatal(err)
			}
			cfg := Config{Sched: sched.Config{Policy: c.policy, MinRuntimeS: c.minRuntime}, Teams: teams, NoFairShare: c.noFairShare}
			r, jct := run(t, tr.Jobs, c.cluster, cfg)
			for id, want := range c.jct {
				if got, ok := jct[id]; !ok || math.Abs(got-want) > 1e-6 {
					t.Errorf("job %d: JCT %v, want %v", id, got, want)
				}
			}
			if r.Preemptions != c.preemptions {
				t.Errorf("preemptions %d, want %d", r.Preemptions, c.preemptions)
			}
			if r.FairShare == c.noFairShare {
				t.Errorf("fair share %v, want %v", r.FairShare, !c.noFairShare)
			}
			if c.teamsWant == nil {
				return
			}
			if len(r.Teams) != len(c.teamsWant) {
				t.Fatalf("teams %+v, want %+v", r.Teams, c.teamsWant)
			}
			for i, w := range c.teamsWant {
				g := r.Teams[i]
				near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }
				if w.GuaranteeMet == 0 { // not worked out: only the rest
					g.GuaranteeMet, g.WaitWithinS, g.MaxWaitWithinS = 0, 0, 0
				}
				if g.Team != w.Team || g.GuaranteedGPUs != w.GuaranteedGPUs || g.Weight != w.Weight || g.Jobs != w.Jobs ||
					g.Finished != w.Finished || g.Reclaims != w.Reclaims || g.PreemptedByReclaim != w.PreemptedByReclaim ||
					!near(g.AvgJCT, w.AvgJCT) || !near(g.AvgPending, w.AvgPending) ||
					!near(g.GPUSeconds, w.GPUSeconds) || !near(g.BorrowedGPUSeconds, w.BorrowedGPUSeconds) ||
					!near(g.GuaranteeMet, w.GuaranteeMet) || !near(g.WaitWithinS, w.WaitWithinS) || !near(g.MaxWaitWithinS, w.MaxWaitWithinS) {
					t.Errorf("team %s:\n got %+v\nwant %+v", w.Team, g, w)
				}
			}
			if c.fairness != 0 && math.Abs(r.Fairness-c.fairness) > 1e-9 {
				t.Errorf("fairness %v, want %v", r.Fairness, c.fairness)
			}
		})
	}
}

// TestFairnessIndex checks Jain's index of usage over share (uncapped) on
// the first golden run: x = 320,000/16 and 16,000/16, so (21,000)^2 /
// (2 (20,000^2 + 1,000^2)).
func TestFairnessIndex(t *testing.T) {
	rs := []TeamResult{{GuaranteedGPUs: 16, GPUSeconds: 320000}, {GuaranteedGPUs: 16, GPUSeconds: 16000}, {GPUSeconds: 5}}
	if got, want := jainUsageOverShare(rs), 21000.0*21000/(2*(20000.0*20000+1000*1000)); math.Abs(got-want) > 1e-12 {
		t.Errorf("Jain %v, want %v", got, want)
	}
	if got := jainUsageOverShare([]TeamResult{{GuaranteedGPUs: 4, GPUSeconds: 10}, {GuaranteedGPUs: 8, GPUSeconds: 20}}); math.Abs(got-1) > 1e-12 {
		t.Errorf("usage in proportion to guarantees: Jain %v, want 1", got)
	}
	if got := jainUsageOverShare(nil); got != 0 {
		t.Errorf("no teams: %v", got)
	}
}

// TestTeamUsageDecays checks that the usage the scheduler sees is the
// decayed usage: one team holding 8 GPUs from 0 to 1,000 s, seen at 2,000.
func TestTeamUsageDecays(t *testing.T) {
	jobs := []trace.Job{gj(1, 0, 8, 1000)}
	jobs[0].Team = "a"
	nodes, _ := trace.ParseClusterSpec("1x8")
	s, err := newSimulator(jobs, Config{Sched: sched.Config{Policy: "fifo"}, Nodes: nodes,
		Teams: []trace.Team{{Name: "a", GuaranteeGPUs: 8}}, HalfLifeS: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.loop(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.teams.advance(2000, nil)
	// 8 GPUs over [0, 1000] with h = 1000, then one half-life of decay.
	want := 8 * 1000 / math.Ln2 * 0.5 * 0.5
	if got := s.teams.t[0].usage; math.Abs(got-want) > 1e-9*want {
		t.Errorf("usage %v, want %v", got, want)
	}
}

// TestInvariantsWithTeams runs random traces of three teams (one of
// them unlisted) under every policy with fair share, and checks what
// TestInvariants checks, and that the teams' GPU-seconds add up to the
// GPU-seconds held, and reclaims made to reclaims suffered.
func TestInvariantsWithTeams(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 13))
	teams := []trace.Team{{Name: "a", GuaranteeGPUs: 4, Weight: 1}, {Name: "b", GuaranteeGPUs: 3, Weight: 2, MaxGPUsPerUser: 4}}
	for trial := range 3 {
		jobs := make([]trace.Job, 40)
		now := 0.0
		for i := range jobs {
			now += math.Floor(r.ExpFloat64() * 60)
			jobs[i] = gj(int64(i), now, []int{1, 1, 2, 4, 8}[r.IntN(5)], math.Ceil(r.ExpFloat64()*1800))
			jobs[i].Team = []string{"a", "b", "c"}[r.IntN(3)]
			jobs[i].User = []string{"u", "v"}[r.IntN(2)]
			if jobs[i].Team == "b" {
				jobs[i].GPUs = min(jobs[i].GPUs, 4) // b caps users at 4
			}
		}
		for _, p := range sched.Policies() {
			for _, placement := range []string{sched.PlaceCount, sched.PlaceNodes} {
				name := fmt.Sprintf("trial%d/%s/%s", trial, p, placement)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					cfg := Config{
						Sched: sched.Config{Policy: p, Placement: placement, Thresholds: []float64{600, 3000}, MinRuntimeS: 120},
						Teams: teams, HalfLifeS: 3600, PreemptCostS: float64(trial),
					}
					checkInvariants(t, jobs, cfg)
					nodes, _ := trace.ParseClusterSpec("2x4")
					cfg.Nodes = nodes
					res, err := Run(context.Background(), jobs, cfg)
					if err != nil {
						t.Fatal(err)
					}
					var gpuSeconds, busy float64
					reclaims, reclaimed := 0, 0
					for _, tr := range res.Teams {
						gpuSeconds += tr.GPUSeconds
						reclaims += tr.Reclaims
						reclaimed += tr.PreemptedByReclaim
					}
					for _, j := range jobs {
						busy += float64(j.GPUs) * j.Duration
					}
					if gpuSeconds < busy-1e-6*busy || reclaims != reclaimed || reclaims > res.Preemptions {
						t.Errorf("teams %+v: GPU-seconds %v (work %v), reclaims %d made, %d suffered, %d preemptions",
							res.Teams, gpuSeconds, busy, reclaims, reclaimed, res.Preemptions)
					}
				})
			}
		}
	}
}
