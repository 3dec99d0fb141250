package sched

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// BenchmarkSchedule measures one pass over a cluster whose GPUs are
// nearly all held, with most jobs waiting: the busy case. Every policy
// runs under its default rule, and tiresias-l and tiresias-g under each
// of their other rules too (policy:rule).
func BenchmarkSchedule(b *testing.B) {
	sizes := []struct{ nodes, jobs int }{{125, 10000}, {1250, 100000}}
	var candidates []string
	for _, pol := range Policies() {
		candidates = append(candidates, pol)
		for _, rule := range PolicyRules(pol)[min(1, len(PolicyRules(pol))):] {
			candidates = append(candidates, pol+":"+rule)
		}
	}
	for _, size := range sizes {
		s := randomSnapshot(rand.New(rand.NewPCG(1, 2)), genOpts{nodes: size.nodes, gpusPerNode: 8, jobs: size.jobs, busy: 0.97})
		for _, cand := range candidates {
			pol, rule, _ := strings.Cut(cand, ":")
			for _, omit := range []bool{false, true} {
				name := fmt.Sprintf("%dgpus-%djobs/%s", size.nodes*8, size.jobs, cand)
				if omit {
					name += "/omit-waits"
				}
				b.Run(name, func(b *testing.B) {
					sc, err := New(Config{Policy: pol, Rule: rule, OmitWaits: omit})
					if err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						sc.Schedule(s)
					}
				})
			}
		}
	}
}

// BenchmarkScheduleReserve is BenchmarkSchedule's busy pass at 1,000 GPUs
// and 10,000 jobs with reservations (Config.ReserveAfterS 300 s): nearly
// every waiting job has waited past the bound, so the first that cannot
// start gets one, and the walk goes on around it. Compare with
// BenchmarkSchedule's passes of the same names on the tree before
// reservations (docs/scheduling.md, "Speed").
func BenchmarkScheduleReserve(b *testing.B) {
	s := randomSnapshot(rand.New(rand.NewPCG(1, 2)), genOpts{nodes: 125, gpusPerNode: 8, jobs: 10000, busy: 0.97})
	for _, pol := range []string{"fjf", "srsf", "tiresias-l", "tiresias-g"} {
		for _, omit := range []bool{false, true} {
			for _, lead := range []float64{0, LeadHalfBound} {
				name := "1000gpus-10000jobs/" + pol
				if omit {
					name += "/omit-waits"
				}
				if lead != 0 {
					name += "/lead-half" // serve's default (rule 7 of "Reservations")
				}
				benchReserve(b, name, s, Config{Policy: pol, OmitWaits: omit, ReserveAfterS: 300, ReserveLeadS: lead})
			}
		}
	}
}

// benchReserve runs BenchmarkScheduleReserve's pass of snapshot s under
// cfg as sub-benchmark name.
func benchReserve(b *testing.B, name string, s Snapshot, cfg Config) {
	b.Run(name, func(b *testing.B) {
		sc, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if d := sc.Schedule(s); len(d.Reservations) == 0 {
			b.Fatal("no reservation made: the benchmark measures none")
		}
		b.ReportAllocs()
		for b.Loop() {
			sc.Schedule(s)
		}
	})
}

// syntheticTrace draws n jobs arriving at a rate that loads gpus GPUs to
// about load, with heavy-tailed durations.
func syntheticTrace(rng *rand.Rand, n, gpus int, load float64) []traceJob {
	out := make([]traceJob, n)
	var meanWork float64
	for i := range out {
		g := genSizes[rng.IntN(len(genSizes))]
		d := 60 * math.Exp(rng.NormFloat64()*1.5+3) // lognormal, median ~20 min
		out[i] = traceJob{id: int64(i + 1), gpus: g, duration: d, model: genModels[rng.IntN(len(genModels))]}
		meanWork += d * float64(g)
	}
	meanWork /= float64(n)
	gap := meanWork / (load * float64(gpus))
	t := 0.0
	for i := range out {
		t += rng.ExpFloat64() * gap
		out[i].submit = t
	}
	return out
}

// BenchmarkReplay replays a whole synthetic trace of 100,000 jobs on
// 2,048 GPUs (count placement, no explanations), as the simulator does.
func BenchmarkReplay(b *testing.B) {
	trace := syntheticTrace(rand.New(rand.NewPCG(3, 4)), 100000, 2048, 0.9)
	for _, pol := range Policies() {
		b.Run(pol, func(b *testing.B) {
			sc, err := New(Config{Policy: pol, Placement: PlaceCount, OmitWaits: true})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				jct, passes := replay(b, sc, uniformNodes(256, 8), trace)
				b.ReportMetric(jct, "jct-s")
				b.ReportMetric(float64(passes), "passes")
			}
		})
	}
}

// BenchmarkQuietPass measures the pass the simulator runs most: 2,048
// GPUs in count mode, about 500 running jobs and a few waiting.
func BenchmarkQuietPass(b *testing.B) {
	s := randomSnapshot(rand.New(rand.NewPCG(5, 6)), genOpts{nodes: 256, gpusPerNode: 8, jobs: 520, busy: 0.9})
	for _, pol := range Policies() {
		b.Run(pol, func(b *testing.B) {
			sc, err := New(Config{Policy: pol, Placement: PlaceCount, OmitWaits: true})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				sc.Schedule(s)
			}
		})
	}
}

// BenchmarkScheduleTeams is BenchmarkSchedule's busy pass at 1,000 GPUs
// and 10,000 jobs with fair share: four teams guaranteed 250 GPUs each,
// with their jobs spread over them and a fifth, unlisted team.
func BenchmarkScheduleTeams(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := randomSnapshot(rng, genOpts{nodes: 125, gpusPerNode: 8, jobs: 10000, busy: 0.97})
	s.Teams = []Team{
		{Name: "t0", GuaranteeGPUs: 250, UsageGPUSeconds: 4e6},
		{Name: "t1", GuaranteeGPUs: 250, UsageGPUSeconds: 1e6},
		{Name: "t2", GuaranteeGPUs: 250, Weight: 2},
		{Name: "t3", GuaranteeGPUs: 250, MaxGPUsPerUser: 64},
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		j.Team, j.User = fmt.Sprintf("t%d", rng.IntN(5)), fmt.Sprintf("u%d", rng.IntN(20))
		j.LastStartTime = s.Now - rng.Float64()*1200
	}
	for _, pol := range []string{"fifo", "tiresias-l", "tiresias-g"} {
		for _, omit := range []bool{false, true} {
			name := pol
			if omit {
				name += "/omit-waits"
			}
			b.Run(name, func(b *testing.B) {
				sc, err := New(Config{Policy: pol, OmitWaits: omit})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					sc.Schedule(s)
				}
			})
		}
	}
}

// BenchmarkScheduleColdIndex is BenchmarkSchedule's busy 1,000-GPU pass
// under tiresias-g with a fresh Scheduler each time, so that no Gittins
// index is remembered from an earlier pass: the cost of the full index's
// first look at every job, against the one-quantum index.
func BenchmarkScheduleColdIndex(b *testing.B) {
	s := randomSnapshot(rand.New(rand.NewPCG(1, 2)), genOpts{nodes: 125, gpusPerNode: 8, jobs: 10000, busy: 0.97})
	for _, rule := range []string{"full-index", "one-quantum"} {
		b.Run(rule, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sc, err := New(Config{Policy: "tiresias-g", Rule: rule, OmitWaits: true})
				if err != nil {
					b.Fatal(err)
				}
				sc.Schedule(s)
			}
		})
	}
}
