package enginestore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// BenchmarkEnginePass runs the engine with the real store (SQLite, and
// PostgreSQL where one runs) and 128 simulated 8-GPU machines, over a
// queue of 1,000 and 10,000 waiting jobs, while jobs end at a steady 25 a
// second (1,024 GPUs with jobs of about 40 s), GPUPORTAL_BENCH_ENDS of
// them (default 250), in one op. It reports the engine's whole passes
// (pass_ms: mean time, and per phase; passes/end), the rows the engine
// writes per pass (rows/pass) and how late job ends are recorded (lag_p50_ms, lag_p99_ms, lag_max_ms: from the end to the
// store's record of it; an end still unrecorded 2 minutes after the last
// counts with its lag then, and in unrecorded). Run it once, as
// scripts/bench-engine does against a baseline:
//
//	go test -run '^$' -bench BenchmarkEnginePass -benchtime 1x ./enginestore/
func BenchmarkEnginePass(b *testing.B) {
	dbs := []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", modelstest.SQLiteDSN}, {"postgres", modelstest.PostgresDSN}}
	for _, db := range dbs {
		for _, queued := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/queued=%d", db.name, queued), func(b *testing.B) {
				benchEnginePass(b, db.dsn(b), queued)
			})
		}
	}
}

const (
	benchNodes   = 128
	benchGPUs    = 8  // per machine
	benchEndRate = 25 // job ends a second
	// benchDrain is how long the benchmark waits for the ends' records
	// after the last end.
	benchDrain = 2 * time.Minute
)

func benchEnginePass(b *testing.B, dsn string, queued int) {
	cfg := sched.Config{Policy: "tiresias-l"}
	if benchSched != nil {
		benchSched(&cfg)
	}
	eng, cl, store, _ := startBenchEngine(b, dsn, queued, cfg)
	before, rows0 := eng.Stats(), store.rows.Load()
	rng := rand.New(rand.NewPCG(1, uint64(queued)))
	ends := benchEnds(b)
	ats := make([]time.Time, 0, ends)   // when each end happened
	recorded := make(chan endLag, ends) // the ends recorded
	tick := time.NewTicker(time.Second / benchEndRate)
	defer tick.Stop()
	b.ResetTimer()
	for range ends {
		<-tick.C
		ref, node, ok := cl.end(rng)
		if !ok {
			continue // every GPU free: nothing to end
		}
		i := len(ats)
		ats = append(ats, time.Now())
		ex := job.Exit{Node: node, JobID: ref.Job, Run: ref.Run, At: ats[i],
			Recorded: func() { recorded <- endLag{i, time.Since(ats[i])} }}
		go func() { cl.exits <- ex }()
	}
	// Every end recorded, or benchDrain after the last: the ends still
	// waiting count with their lag so far.
	lags := make([]time.Duration, len(ats))
	drain := time.After(benchDrain)
	unrecorded := len(ats)
wait:
	for unrecorded > 0 {
		select {
		case r := <-recorded:
			lags[r.i] = r.lag
			unrecorded--
		case <-drain:
			for i, at := range ats {
				if lags[i] == 0 {
					lags[i] = time.Since(at)
				}
			}
			break wait
		}
	}
	b.StopTimer()
	// Wait for the pass that follows the last end, so that the figures
	// count whole passes.
	for last := eng.Stats().WholePass.Count; unrecorded == 0 && eng.Stats().WholePass.Count == last; {
		time.Sleep(10 * time.Millisecond)
	}
	after, rows := eng.Stats(), store.rows.Load()-rows0
	passes := float64(after.WholePass.Count - before.WholePass.Count)
	b.ReportMetric((after.WholePass.Sum-before.WholePass.Sum)/passes*1000, "pass_ms")
	for _, ph := range engine.Phases() {
		b.ReportMetric((after.PhaseSeconds[ph]-before.PhaseSeconds[ph])/passes*1000, ph+"_ms")
	}
	b.ReportMetric(passes/float64(len(ats)), "passes/end")
	b.ReportMetric(float64(rows)/passes, "rows/pass")
	b.ReportMetric(float64(unrecorded), "unrecorded")
	slices.Sort(lags)
	q := func(p float64) float64 {
		return float64(lags[min(len(lags)-1, int(p*float64(len(lags))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "lag_p50_ms")
	b.ReportMetric(q(0.99), "lag_p99_ms")
	b.ReportMetric(q(1), "lag_max_ms")
}

// startBenchEngine seeds the store at dsn with queued waiting jobs beyond
// those that fill the benchmark's 128 simulated 8-GPU machines, runs an
// engine over it that schedules by cfg, and returns once it has settled:
// the machines are full and a whole pass started nothing. The engine
// stops when b ends.
func startBenchEngine(b *testing.B, dsn string, queued int, cfg sched.Config) (*engine.Engine, *benchCluster, *rowCounter, *models.Store) {
	b.Helper()
	submitted := time.Now().Add(-time.Hour)
	return startBenchEngineSubmitted(b, dsn, queued, cfg, func(i int) time.Time {
		return submitted.Add(time.Duration(i) * time.Millisecond)
	})
}

// startBenchEngineSubmitted is startBenchEngine with seed job i (of
// queued plus the 1,024 that fill the machines, in ID order) submitted
// at submitted(i).
func startBenchEngineSubmitted(b *testing.B, dsn string, queued int, cfg sched.Config, submitted func(i int) time.Time) (*engine.Engine, *benchCluster, *rowCounter, *models.Store) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ms, err := models.Open(ctx, dsn)
	if err != nil {
		b.Fatalf("open %s: %v", models.RedactDSN(dsn), err)
	}
	b.Cleanup(func() { ms.Close() })
	b.Cleanup(cancel) // before the store closes: cleanups run last first
	teams := []string{"vision", "speech", "nlp", "robotics"}
	for _, t := range teams {
		if _, err := ms.CreateTeam(ctx, t, benchNodes*benchGPUs/len(teams)); err != nil {
			b.Fatal(err)
		}
	}
	// Enough jobs to fill every GPU and leave queued waiting: one in ten
	// asks for 4 GPUs, one in five for 2, the others for one.
	total := queued + benchNodes*benchGPUs
	for from := 0; from < total; from += 1000 {
		var js []*models.Job
		for i := from; i < min(total, from+1000); i++ {
			gpus := 1
			switch {
			case i%10 == 0:
				gpus = 4
			case i%5 == 0:
				gpus = 2
			}
			js = append(js, &models.Job{Name: fmt.Sprintf("bench-%d", i), Team: teams[i%len(teams)],
				User: fmt.Sprintf("user%02d", i%40), GPUs: gpus, SimDuration: 3600,
				SubmittedAt: submitted(i)})
		}
		if err := ms.CreateJobs(ctx, js); err != nil {
			b.Fatal(err)
		}
	}
	store := &rowCounter{Store: New(ms)}
	sc, err := sched.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: store, Scheduler: sc, Interval: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Forecast: engine.ForecastConfig{Off: true}})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	cl := &benchCluster{exits: eng.Exits(), runs: make(map[job.RunRef]string)}
	for i := range benchNodes {
		if err := eng.AddNode(ctx, &benchNode{name: fmt.Sprintf("node%03d", i), cl: cl}); err != nil {
			b.Fatal(err)
		}
	}
	// Let the engine fill the machines and settle: the first passes
	// write every waiting job's reason once. Settled is a whole pass that
	// started nothing.
	deadline := time.Now().Add(10 * time.Minute)
	for {
		st := eng.Stats()
		time.Sleep(2 * time.Second) // a pass at least: Interval is 1 s
		now := eng.Stats()
		if cl.count() > 0 && now.WholePass.Count > st.WholePass.Count && now.Starts == st.Starts {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the engine did not settle in 10 minutes")
		}
	}
	return eng, cl, store, ms
}

// endLag is the lag of the record of end i.
type endLag struct {
	i   int
	lag time.Duration
}

// benchEnds is how many job ends a run has: GPUPORTAL_BENCH_ENDS, 250 by
// default.
// benchSched, where set, adjusts the scheduler's configuration to the
// tree's (pass_bench_reserve_test.go); a baseline without it schedules
// as it did.
var benchSched func(*sched.Config)

func benchEnds(b *testing.B) int {
	v := os.Getenv("GPUPORTAL_BENCH_ENDS")
	if v == "" {
		return 250
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("GPUPORTAL_BENCH_ENDS=%q: want a count of job ends", v)
	}
	return n
}

// rowCounter counts the job rows the engine writes through the store
// (pass_bench_starts_test.go counts the starts a pass records at once:
// scripts/bench-engine runs this file alone on a baseline without them).
type rowCounter struct {
	Store
	rows atomic.Int64
}

func (s *rowCounter) SetReasons(ctx context.Context, reasons map[int64]string) error {
	s.rows.Add(int64(len(reasons)))
	return s.Store.SetReasons(ctx, reasons)
}

func (s *rowCounter) SetQueueStates(ctx context.Context, states map[int64]sched.QueueState) error {
	s.rows.Add(int64(len(states)))
	return s.Store.SetQueueStates(ctx, states)
}

func (s *rowCounter) MarkStarted(ctx context.Context, id int64, placement []gpu.Ref, now time.Time) (int64, error) {
	s.rows.Add(1)
	return s.Store.MarkStarted(ctx, id, placement, now)
}

func (s *rowCounter) MarkStopped(ctx context.Context, ref job.RunRef, to job.State, exitCode *int, reason string, handover usage.Service, now time.Time) error {
	s.rows.Add(1)
	return s.Store.MarkStopped(ctx, ref, to, exitCode, reason, handover, now)
}

func (s *rowCounter) MarkRetry(ctx context.Context, ref job.RunRef, exitCode int, reason string, retryAt, now time.Time) error {
	s.rows.Add(1)
	return s.Store.MarkRetry(ctx, ref, exitCode, reason, retryAt, now)
}

func (s *rowCounter) SetMeasuredMemory(ctx context.Context, id int64, est memest.Estimate) error {
	s.rows.Add(1)
	return s.Store.SetMeasuredMemory(ctx, id, est)
}

// benchCluster is the runs of the benchmark's simulated machines: a run
// goes on until the benchmark ends it or the engine stops it.
type benchCluster struct {
	exits chan<- job.Exit
	mu    sync.Mutex
	runs  map[job.RunRef]string // run -> its machine
}

func (c *benchCluster) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.runs)
}

// end picks a run at random and ends it on its machine.
func (c *benchCluster) end(rng *rand.Rand) (job.RunRef, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.runs) == 0 {
		return job.RunRef{}, "", false
	}
	refs := make([]job.RunRef, 0, len(c.runs))
	for ref := range c.runs {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b job.RunRef) int { return int(a.Job - b.Job) })
	ref := refs[rng.IntN(len(refs))]
	node := c.runs[ref]
	delete(c.runs, ref)
	return ref, node, true
}

// benchNode is a simulated machine whose runs start at once and end
// when the benchmark or the engine says.
type benchNode struct {
	name string
	cl   *benchCluster
}

func (n *benchNode) Name() string { return n.name }

func (n *benchNode) Devices() []gpu.Device {
	out := make([]gpu.Device, benchGPUs)
	for i := range out {
		out[i] = gpu.Device{Index: i, Model: "H100", MemMiB: 80 << 10}
	}
	return out
}

func (n *benchNode) Resources() (int, int64) { return 128, 1 << 20 }

func (n *benchNode) Start(_ context.Context, s job.Spec) error {
	n.cl.mu.Lock()
	defer n.cl.mu.Unlock()
	n.cl.runs[job.RunRef{Job: s.JobID, Run: s.Run}] = n.name
	return nil
}

func (n *benchNode) Stop(_ context.Context, ref job.RunRef) error {
	n.cl.mu.Lock()
	defer n.cl.mu.Unlock()
	if _, ok := n.cl.runs[ref]; ok {
		delete(n.cl.runs, ref)
		go func() {
			n.cl.exits <- job.Exit{Node: n.name, JobID: ref.Job, Run: ref.Run, ExitCode: 143, At: time.Now()}
		}()
	}
	return nil
}

func (n *benchNode) Running() []job.RunRef {
	n.cl.mu.Lock()
	defer n.cl.mu.Unlock()
	var out []job.RunRef
	for ref, node := range n.cl.runs {
		if node == n.name {
			out = append(out, ref)
		}
	}
	return out
}

func (n *benchNode) Sample(time.Time) []gpu.Sample { return nil }
