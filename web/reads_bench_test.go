package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// scaleReads are the reads whose cost followed the queue's length
// (issue 33): each page and answer, as alice (a researcher of vision)
// or admin.
var scaleReads = []struct{ name, role, target string }{
	{"queues-page", "admin", "/queues"},
	{"queues-live", "admin", "/queues/live"},
	{"api-queues", "admin", "/api/v1/queues"},
	{"team-page", "alice", "/teams/vision"},
	{"api-team", "alice", "/api/v1/teams/vision"},
	{"api-jct", "alice", "/api/v1/stats/jct"},
	{"metrics", "anonymous", "/metrics"},
	{"jobs-page", "admin", "/jobs"},
	{"api-jobs", "admin", "/api/v1/jobs?scope=all"},
}

// BenchmarkReadsAtScale measures each read of scaleReads at 10 and at
// 10,000 queued jobs, beside 100,000 finished ones and a machine of 8
// GPUs running 8 of them, on SQLite and PostgreSQL; resp-B is the size
// of the answer. Compare each read's ns/op at q10000 with its q10 of the
// same run: the goal is a ratio under 2. ws-queues and ws-team are the
// live stream's first frame of those topics. cpu-ms/op is the CPU the
// read itself used (threadCPU), what to compare on a loaded machine.
// GPUPORTAL_BENCH_FINISHED
// sets the finished jobs (100,000 by default); GPUPORTAL_BENCH_QUEUED the
// queue lengths, comma-separated (10,10000 by default; 100 is the first
// length whose pages show as many jobs as at 10,000).
//
//	go test -run '^$' -bench ReadsAtScale -benchtime 10x ./web
func BenchmarkReadsAtScale(b *testing.B) {
	finished := 100_000
	if v := os.Getenv("GPUPORTAL_BENCH_FINISHED"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.Fatalf("GPUPORTAL_BENCH_FINISHED=%q: want a number of jobs", v)
		}
		finished = n
	}
	queues := []int{10, 10_000}
	if v := os.Getenv("GPUPORTAL_BENCH_QUEUED"); v != "" {
		queues = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 {
				b.Fatalf("GPUPORTAL_BENCH_QUEUED=%q: want queue lengths, comma-separated", v)
			}
			queues = append(queues, n)
		}
	}
	for _, db := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", modelstest.SQLiteDSN}, {"postgres", modelstest.PostgresDSN}} {
		b.Run(db.name, func(b *testing.B) {
			for _, queued := range queues {
				b.Run(fmt.Sprintf("q%d", queued), func(b *testing.B) {
					ts := scaleServer(b, db.dsn(b), queued, finished)
					for _, r := range scaleReads {
						b.Run(r.name, func(b *testing.B) {
							size := 0
							cpu := threadCPU(b)
							for range b.N {
								rec := ts.doAs(b, r.role, ts.sessions[r.role], http.MethodGet, r.target, "")
								if rec.Code != http.StatusOK {
									b.Fatalf("%s: %d %.300s", r.target, rec.Code, rec.Body)
								}
								size = rec.Body.Len()
							}
							b.ReportMetric(cpu()/float64(b.N), "cpu-ms/op")
							b.ReportMetric(float64(size), "resp-B")
						})
					}
					// The live stream's first frame of the queues and of a
					// team, to a new viewer.
					for _, topic := range []struct{ name, role, topic string }{
						{"ws-queues", "admin", "queues"},
						{"ws-team", "alice", "team:vision"},
					} {
						b.Run(topic.name, func(b *testing.B) {
							u, err := ts.store.UserByName(context.Background(), topic.role)
							if err != nil {
								b.Fatal(err)
							}
							size := 0
							cpu := threadCPU(b)
							for range b.N {
								data, err := ts.snapshot(context.Background(), viewOf(u), topic.topic)
								if err != nil {
									b.Fatal(err)
								}
								msg, err := json.Marshal(wsOut{Topic: topic.topic, Type: "snapshot", Data: data})
								if err != nil {
									b.Fatal(err)
								}
								size = len(msg)
							}
							b.ReportMetric(cpu()/float64(b.N), "cpu-ms/op")
							b.ReportMetric(float64(size), "resp-B")
						})
					}
				})
			}
		})
	}
}

// threadCPU locks the benchmark's goroutine to its thread and returns a
// function that says the milliseconds of CPU the thread has used since:
// the read's own work (the handler runs on the caller's goroutine, and
// SQLite in it), whatever else the machine runs meanwhile. On a shared
// machine the wall time of a read follows the load; this does not. It
// leaves out PostgreSQL's own work, done in its processes, and the
// garbage collector's on other threads.
func threadCPU(b *testing.B) func() float64 {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	used := func() float64 {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
			b.Fatal(err)
		}
		return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
	}
	from := used()
	return func() float64 { return used() - from }
}

// scaleServer is a test server on dsn with finished jobs that ended over
// the last finished minutes, queued jobs of vision and nlp, and a
// machine of 8 GPUs; it returns once the engine has placed the queued
// jobs in its order.
func scaleServer(b *testing.B, dsn string, queued, finished int) *testServer {
	b.Helper()
	ts := newTestServerOn(b, dsn)
	seedJobs(b, dsn, finished)
	seedQueued(b, dsn, queued)
	a, err := agent.New(agent.Config{Name: "m000", Backend: gpu.NewSim("m000", 8, 80<<10), WorkDir: b.TempDir()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := ts.engine.AddNode(context.Background(), a); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ts.engine.Wake()
		if len(ts.engine.Waits()) >= queued-8 {
			break
		}
		if time.Now().After(deadline) {
			// The reads cost the same with fewer positions known.
			b.Logf("the engine placed %d of %d queued jobs in 5 minutes", len(ts.engine.Waits()), queued)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The engine's first pass wrote every queued job's queue state; the
	// store reads a changed row again for 5 s after its change
	// (models/queueview.go). Measure the reads of a queue that changes as
	// queues do, a few jobs at a time, not the seconds after a burst.
	time.Sleep(6 * time.Second)
	return ts
}

// seedQueued stores n queued jobs of alice's and bob's, an hour long
// each, straight into the database.
func seedQueued(b *testing.B, dsn string, n int) {
	b.Helper()
	db := modelstest.Gorm(b, dsn)
	at := time.Now().Add(-time.Duration(n) * time.Second)
	js := make([]models.Job, 0, n)
	for i := range n {
		team, user := "vision", "alice"
		if i%2 == 1 {
			team, user = "nlp", "bob"
		}
		js = append(js, models.Job{Name: fmt.Sprintf("wait-%d", i), Team: team, User: user, GPUs: 1 + i%2,
			SimDuration: 3600, State: models.JobQueued, SubmittedAt: at.Add(time.Duration(i) * time.Second)})
	}
	if err := db.CreateInBatches(js, 250).Error; err != nil {
		b.Fatalf("seed %d queued jobs: %v", n, err)
	}
	if db.Dialector.Name() == "postgres" {
		if err := db.Exec("ANALYZE jobs").Error; err != nil {
			b.Fatal(err)
		}
	}
}
