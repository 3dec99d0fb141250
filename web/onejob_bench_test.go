package web

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// BenchmarkOneJobAtQueue measures what shows one job or one array (its
// page, GET /api/v1/jobs/{id}, its job:<id> topic's snapshot, the
// array's page and GET /api/v1/arrays/{id}) with 10,000 jobs queued on
// SQLite: each should read what it shows, not the whole queue (issue 23).
//
//	go test -run '^$' -bench OneJobAtQueue -benchtime 100x ./web
func BenchmarkOneJobAtQueue(b *testing.B) {
	ts := newTestServer(b)
	ctx := context.Background()
	const queued = 10_000
	ts.addJobs(b, queued, "queued", "nlp", "bob", nil)
	waiting := ts.newJob(b)
	running := ts.startedJob(b, "running", 1, []string{"node-0:0"}, time.Now().Add(-time.Minute))
	array := ts.newArray(b)
	alice, err := ts.store.UserByName(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, target string }{
		{"page/waiting", fmt.Sprintf("/jobs/%d", waiting)},
		{"page/running", fmt.Sprintf("/jobs/%d", running)},
		{"api/waiting", fmt.Sprintf("/api/v1/jobs/%d", waiting)},
		{"api/running", fmt.Sprintf("/api/v1/jobs/%d", running)},
		{"page/array", fmt.Sprintf("/arrays/%d", array)},
		{"api/array", fmt.Sprintf("/api/v1/arrays/%d", array)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				rec := ts.doAs(b, "alice", ts.sessions["alice"], http.MethodGet, bc.target, "")
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d %s", bc.target, rec.Code, rec.Body)
				}
			}
		})
	}
	b.Run("topic/waiting", func(b *testing.B) {
		for range b.N {
			if _, err := ts.snapshot(ctx, alice, fmt.Sprintf("%s%d", topicJob, waiting)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
