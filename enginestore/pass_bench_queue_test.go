package enginestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// BenchmarkEngineQueue measures what one engine pass costs at a short
// and at a long queue: with the engine settled over 128 simulated 8-GPU
// machines and queued jobs waiting, each op submits a job, ends a run at
// random and waits for the pass that follows the end's record, so that
// the queue stays about as long as it began; five such ops come first,
// unmeasured (warmOps), changeOverlap after the settling. pass_ms is the mean whole
// pass over the ops (with its phases, as BenchmarkEnginePass), rows/pass
// the job rows it writes, cpu_ms/op the process's CPU time per op (the
// submission, the end's record and the pass: on a shared machine a
// steadier measure than the pass's time). Reservations on (serve's default,
// --reserve-after 5m) and off, so that their cost shows too. Unlike
// BenchmarkEnginePass no clock paces it: it measures the CPU a pass
// takes, as a ratio between the sub-benchmarks (or between commits:
// scripts/bench-pass).
//
//	go test -run '^$' -bench 'BenchmarkEngineQueue/sqlite' -benchtime 200x -count 3 ./enginestore/
//
// GPUPORTAL_BENCH_CPUPROFILE names a file for a CPU profile of the ops
// alone (not the seeding and settling), for one sub-benchmark.
func BenchmarkEngineQueue(b *testing.B) {
	dbs := []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", modelstest.SQLiteDSN}, {"postgres", modelstest.PostgresDSN}}
	for _, db := range dbs {
		for _, queued := range []int{10, 10000} {
			for _, reserve := range []bool{false, true} {
				name := fmt.Sprintf("%s/queued=%d/reserve=%s", db.name, queued, map[bool]string{false: "off", true: "on"}[reserve])
				b.Run(name, func(b *testing.B) {
					cfg := sched.Config{Policy: "tiresias-l"}
					if reserve {
						cfg.ReserveAfterS = 300 // serve's default
					}
					benchEngineQueue(b, db.dsn(b), queued, cfg)
				})
			}
		}
	}
}

func benchEngineQueue(b *testing.B, dsn string, queued int, cfg sched.Config) {
	eng, cl, store, ms := startBenchEngine(b, dsn, queued, cfg)
	benchQueueOps(b, eng, cl, store, ms, queued)
}

// benchQueueOps times b.N ops on a settled engine (startBenchEngine) over
// queued waiting jobs, each a submission, an end at random and the whole
// pass after the end's record, and reports the figures
// BenchmarkEngineQueue describes.
func benchQueueOps(b *testing.B, eng *engine.Engine, cl *benchCluster, store *rowCounter, ms *models.Store, queued int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(2, uint64(queued)))
	recorded := make(chan uint64, 1) // whole passes when the end was recorded
	op := func(name string, i int) {
		gpus := 1
		switch {
		case i%10 == 0:
			gpus = 4
		case i%5 == 0:
			gpus = 2
		}
		j := &models.Job{Name: name, Team: []string{"vision", "speech", "nlp", "robotics"}[i%4],
			User: fmt.Sprintf("user%02d", i%40), GPUs: gpus, SimDuration: 3600, SubmittedAt: time.Now()}
		if err := ms.CreateJob(ctx, j); err != nil {
			b.Fatal(err)
		}
		ref, node, ok := cl.end(rng)
		if !ok {
			b.Fatal("no run to end: every GPU is free")
		}
		cl.exits <- job.Exit{Node: node, JobID: ref.Job, Run: ref.Run, At: time.Now(),
			Recorded: func() { recorded <- eng.Stats().WholePass.Count }}
		// The pass that follows the end's record, whole.
		for passes := <-recorded; eng.Stats().WholePass.Count <= passes; {
			time.Sleep(time.Millisecond)
		}
	}
	// A few ops before the measured ones, so that they measure passes as
	// they go on: the view's first read after the settling's whole read
	// (the seed's rows, a one-time cost) is not one of theirs. And
	// changeOverlap first: until then every read takes the stamps of the
	// rows the settling changed again (3,400 a pass at 10,000 queued, a
	// third of the pass), the cost of a burst's first seconds, not of
	// passes as they go on.
	time.Sleep(changeOverlap)
	for i := range warmOps {
		op(fmt.Sprintf("warm-%d", i), i)
	}
	if path := os.Getenv("GPUPORTAL_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				b.Error(err)
			}
		}()
	}
	before, rows0, cpu0 := eng.Stats(), store.rows.Load(), cpuTime(b)
	b.ResetTimer()
	for i := range b.N {
		op(fmt.Sprintf("more-%d", i), i)
	}
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	after, rows := eng.Stats(), store.rows.Load()-rows0
	passes := float64(after.WholePass.Count - before.WholePass.Count)
	b.ReportMetric((after.WholePass.Sum-before.WholePass.Sum)/passes*1000, "pass_ms")
	for _, ph := range engine.Phases() {
		b.ReportMetric((after.PhaseSeconds[ph]-before.PhaseSeconds[ph])/passes*1000, ph+"_ms")
	}
	b.ReportMetric(float64(rows)/passes, "rows/pass")
	b.ReportMetric(passes/float64(b.N), "passes/op")
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu_ms/op")
}

// warmOps is how many ops benchQueueOps makes before those it measures.
const warmOps = 5

// cpuTime is the CPU time the process has used so far (user and system):
// on a shared machine the time a pass takes follows what else runs,
// its CPU much less.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
