package web

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/models"
)

// BenchmarkOneJobAtQueue measures what shows one job or one array (its
// page, GET /api/v1/jobs/{id}, its job:<id> topic's snapshot, the
// array's page and GET /api/v1/arrays/{id}), and the cluster page (its
// GPUs' holders), with 10,000 jobs queued on SQLite behind a job that
// runs on the one GPU: each should read what it shows, not the whole
// queue (issue 23).
//
//	go test -run '^$' -bench OneJobAtQueue -benchtime 20x ./web
func BenchmarkOneJobAtQueue(b *testing.B) {
	ts := newTestServer(b)
	ctx := context.Background()
	node, err := agent.New(agent.Config{Name: "node-0", Backend: gpu.NewSim("node-0", 1, 80<<10), WorkDir: b.TempDir()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := ts.engine.AddNode(ctx, node); err != nil {
		b.Fatal(err)
	}
	run := &models.Job{Name: "running", Team: "vision", User: "alice", GPUs: 1, SimDuration: 24 * 3600, SubmittedAt: time.Now()}
	if err := ts.store.CreateJob(ctx, run); err != nil {
		b.Fatal(err)
	}
	ts.engine.Wake()
	stillRuns := func(b testing.TB) {
		b.Helper()
		j, err := ts.store.Job(ctx, run.ID)
		if err != nil || j.State != models.JobRunning {
			b.Fatalf("job %d: %+v, %v; want it running", run.ID, j, err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if j, err := ts.store.Job(ctx, run.ID); err == nil && j.State == models.JobRunning {
			break
		}
		if time.Now().After(deadline) {
			stillRuns(b)
		}
	}
	const queued = 10_000
	ts.addJobs(b, queued, "queued", "nlp", "bob", nil)
	waiting := ts.newJob(b)
	array := ts.newArray(b)
	alice, err := ts.store.UserByName(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, target string }{
		{"page/waiting", fmt.Sprintf("/jobs/%d", waiting)},
		{"page/running", fmt.Sprintf("/jobs/%d", run.ID)},
		{"api/waiting", fmt.Sprintf("/api/v1/jobs/%d", waiting)},
		{"api/running", fmt.Sprintf("/api/v1/jobs/%d", run.ID)},
		{"page/array", fmt.Sprintf("/arrays/%d", array)},
		{"api/array", fmt.Sprintf("/api/v1/arrays/%d", array)},
		{"page/cluster", "/cluster"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				rec := ts.doAs(b, "alice", ts.sessions["alice"], http.MethodGet, bc.target, "")
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d %s", bc.target, rec.Code, rec.Body)
				}
			}
			stillRuns(b) // what was measured showed a running job
		})
	}
	b.Run("topic/waiting", func(b *testing.B) {
		for range b.N {
			if _, err := ts.snapshot(ctx, viewOf(alice), fmt.Sprintf("%s%d", topicJob, waiting)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
