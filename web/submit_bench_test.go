package web

import (
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkSubmitAtQueue measures a submission through the API (POST
// /api/v1/jobs, the engine running, SQLite) with 0 and 3,000 jobs
// already queued: its checks and its answer should not grow with the
// queue (issue 23).
//
//	go test -run '^$' -bench SubmitAtQueue -benchtime 200x ./web
func BenchmarkSubmitAtQueue(b *testing.B) {
	const body = `{"name":"x","team":"vision","gpus":1,"sim":{"duration_s":60}}`
	for _, queued := range []int{0, 3000} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			ts := newTestServer(b)
			ts.addJobs(b, queued, "queued", "nlp", "bob", nil)
			b.ResetTimer()
			for range b.N {
				rec := ts.doAs(b, "alice", "", http.MethodPost, "/api/v1/jobs", body)
				if rec.Code != http.StatusCreated {
					b.Fatalf("POST /api/v1/jobs: %d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
