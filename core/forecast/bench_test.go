package forecast

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
)

// busyCluster is 125 nodes of 8 GPUs (1,000 GPUs), every GPU held by a
// running job of 1, 2, 4 or 8 GPUs, with waiting jobs waiting, and a
// history of 5,000 heavy-tailed run times (median about 20 minutes).
func busyCluster(rng *rand.Rand, waiting int) Input {
	const nodeCount, per = 125, 8
	users := 40
	models := []string{"resnet50", "vgg16", "bert", "gpt2", "inception3"}
	s := sched.Snapshot{Now: 1e6}
	id := int64(1)
	for n := range nodeCount {
		node := sched.Node{Name: "node" + strconv.Itoa(n)}
		for k := range per {
			node.GPUs = append(node.GPUs, sched.GPU{Index: k, MemMiB: 81920})
		}
		s.Nodes = append(s.Nodes, node)
		for used := 0; used < per; {
			g := min([]int{1, 2, 4, 8}[rng.IntN(4)], per-used)
			ran := rng.Float64() * 3600
			j := sched.Job{ID: id, User: "u" + strconv.Itoa(rng.IntN(users)), Team: "t" + strconv.Itoa(rng.IntN(4)),
				GPUs: g, State: sched.Running, SubmitTime: s.Now - ran - rng.Float64()*600, LastStartTime: s.Now - ran,
				ExecutedS: ran, AttainedService: ran * float64(g), Model: models[rng.IntN(len(models))]}
			for k := range g {
				j.Placement = append(j.Placement, gpu.Ref{Node: node.Name, Index: used + k})
			}
			used += g
			s.Jobs = append(s.Jobs, j)
			id++
		}
	}
	for i := range waiting {
		s.Jobs = append(s.Jobs, sched.Job{ID: id, User: "u" + strconv.Itoa(rng.IntN(users)), Team: "t" + strconv.Itoa(rng.IntN(4)),
			GPUs: []int{1, 1, 1, 2, 2, 4, 8}[rng.IntN(7)], SubmitTime: s.Now - float64(waiting-i),
			Model: models[rng.IntN(len(models))]})
		id++
	}
	hist := make([]Sample, 5000)
	for i := range hist {
		hist[i] = Sample{User: "u" + strconv.Itoa(rng.IntN(users)), Team: "t" + strconv.Itoa(rng.IntN(4)),
			Model: models[rng.IntN(len(models))], RunS: 60 * math.Exp(rng.NormFloat64()*1.5+3)}
	}
	return Input{Snapshot: s, History: NewHistory(hist, 0)}
}

// BenchmarkForecast measures one whole forecast (three scenarios) of a
// busy 1,000-GPU cluster with 1,000 and 10,000 waiting jobs, at the
// default budget.
func BenchmarkForecast(b *testing.B) {
	for _, waiting := range []int{1000, 10000} {
		in := busyCluster(rand.New(rand.NewPCG(7, 8)), waiting)
		for _, pol := range []string{"tiresias-l", "fifo"} {
			b.Run(fmt.Sprintf("%dwaiting/%s", waiting, pol), func(b *testing.B) {
				f, err := New(Config{Sched: sched.Config{Policy: pol}})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				var r Result
				for b.Loop() {
					r = f.Forecast(in)
				}
				started := 0
				for _, fc := range r.Jobs {
					if fc.State == StateExpected {
						started++
					}
				}
				b.ReportMetric(float64(r.Passes), "passes")
				b.ReportMetric(float64(started), "forecast")
			})
		}
	}
}

// smallCluster is one machine of 8 GPUs, each held by a running job of
// one GPU, with waiting jobs of 1 and 2 GPUs of two teams behind them,
// and jobs like them arriving 16 an hour: the portal's BenchmarkReadsAtScale
// (web/reads_bench_test.go) as its engine forecasts it.
func smallCluster(rng *rand.Rand, waiting int) Input {
	s := sched.Snapshot{Now: 1e6, Teams: []sched.Team{{Name: "vision"}, {Name: "nlp"}}}
	node := sched.Node{Name: "m000"}
	for k := range 8 {
		node.GPUs = append(node.GPUs, sched.GPU{Index: k, MemMiB: 81920})
	}
	s.Nodes = []sched.Node{node}
	id := int64(1)
	for k := range 8 {
		ran := rng.Float64() * 3600
		s.Jobs = append(s.Jobs, sched.Job{ID: id, User: "alice", Team: "vision", GPUs: 1, State: sched.Running,
			SubmitTime: s.Now - ran - 600, LastStartTime: s.Now - ran, ExecutedS: ran, AttainedService: ran,
			Placement: []gpu.Ref{{Node: node.Name, Index: k}}})
		id++
	}
	for i := range waiting {
		team, user := "vision", "alice"
		if i%2 == 1 {
			team, user = "nlp", "bob"
		}
		s.Jobs = append(s.Jobs, sched.Job{ID: id, User: user, Team: team, GPUs: 1 + i%2, SubmitTime: s.Now - float64(waiting-i)})
		id++
	}
	hist := make([]Sample, 5000)
	for i := range hist {
		hist[i] = Sample{User: "alice", Team: "vision", RunS: 60 * math.Exp(rng.NormFloat64()*1.5+3)}
	}
	like := []sched.Job{{Team: "vision", User: "alice", GPUs: 1}, {Team: "nlp", User: "bob", GPUs: 2}}
	return Input{Snapshot: s, History: NewHistory(hist, 0), Arrivals: &Arrivals{RatePerS: 16.0 / 3600, Like: like}}
}

// BenchmarkForecastLongQueue measures one whole forecast of a small
// cluster behind 1,000 and 10,000 waiting jobs (smallCluster), at the
// default budget: forecast counts the jobs given a start.
func BenchmarkForecastLongQueue(b *testing.B) {
	for _, waiting := range []int{1000, 10000} {
		in := smallCluster(rand.New(rand.NewPCG(7, 8)), waiting)
		b.Run(fmt.Sprintf("%dwaiting", waiting), func(b *testing.B) {
			f, err := New(Config{Sched: sched.Config{Policy: "fifo"}})
			if err != nil {
				b.Fatal(err)
			}
			var r Result
			for b.Loop() {
				r = f.Forecast(in)
			}
			started := 0
			for _, fc := range r.Jobs {
				if fc.State == StateExpected {
					started++
				}
			}
			b.ReportMetric(float64(r.Passes), "passes")
			b.ReportMetric(float64(r.Visits), "visits")
			b.ReportMetric(float64(started), "forecast")
		})
	}
}
