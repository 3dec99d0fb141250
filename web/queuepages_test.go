package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// A queue read page by page with its cursors gives every job once, in the
// scheduler's order, while jobs are submitted and leave between the
// reads (issue 33): no job lost, none repeated.
func TestQueuePagesLoseAndRepeatNoJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		submit, leave int // between two page reads
	}{
		{"submitted between pages", 7, 0},
		{"jobs shown leave between pages", 0, 3},
		{"both", 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t)
			queueJobs(t, ts, 120)
			waitPlaced(t, ts, 120)
			first := queuePage0(t, ts, "?limit=25")
			want := first.Total
			seen := map[int64]int{}
			var shown []int64
			page, round := first, 0
			for {
				for _, j := range page.Jobs {
					seen[j.ID]++
					shown = append(shown, j.ID)
				}
				if page.NextCursor == "" {
					break
				}
				round++
				// Between the reads: new jobs, and jobs already shown leave.
				if tc.submit > 0 {
					js := make([]*models.Job, tc.submit)
					for i := range js {
						js[i] = &models.Job{Name: fmt.Sprint("late", round, "-", i), Team: "nlp", User: "bob", GPUs: 1, SimDuration: 60, SubmittedAt: time.Now()}
					}
					if err := ts.store.CreateJobs(context.Background(), js); err != nil {
						t.Fatal(err)
					}
					want += tc.submit
				}
				// The last job shown, which the cursor names, stays.
				for _, id := range shown[max(len(shown)-1-tc.leave, 0) : len(shown)-1] {
					if err := ts.engine.Cancel(context.Background(), id, "test"); err != nil {
						t.Fatal(err)
					}
				}
				waitPlaced(t, ts, want-round*tc.leave)
				page = queuePage0(t, ts, "?limit=25&cursor="+page.NextCursor)
				if round > 100 {
					t.Fatal("the pages do not end")
				}
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("job %d shown %d times", id, n)
				}
			}
			// Every job of the queue, those submitted while it was read
			// included (they go last, as fifo orders them), was shown.
			if len(seen) != want {
				t.Errorf("%d jobs shown over %d pages, want %d", len(seen), round+1, want)
			}
		})
	}
}

// waitPlaced waits for the engine's pass to place n waiting jobs.
func waitPlaced(t *testing.T, ts *testServer, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ts.engine.Wake()
		if len(ts.engine.Waits()) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine placed %d jobs, want %d", len(ts.engine.Waits()), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// queuePage0 is the first queue of GET /api/v1/queues + query, as alice.
func queuePage0(t *testing.T, ts *testServer, query string) api.Queue {
	t.Helper()
	rec := ts.do(t, "alice", http.MethodGet, "/api/v1/queues"+query, "")
	var q api.Queues
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &q) != nil || len(q.Queues) == 0 {
		t.Fatalf("GET /api/v1/queues%s: %d %.300s", query, rec.Code, rec.Body)
	}
	return q.Queues[0]
}

// The Queues page shows each queue's first page, its count and a link to
// the next page, which shows the jobs after it.
func TestQueuesPageShowsAPageAndTotals(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	queueJobs(t, ts, queueTopicPage+20)
	waitPlaced(t, ts, queueTopicPage+20)
	body := ts.do(t, "alice", http.MethodGet, "/queues", "").Body.String()
	if got := strings.Count(body, "<tr data-job="); got != queueTopicPage {
		t.Errorf("the Queues page shows %d jobs, want %d", got, queueTopicPage)
	}
	want := fmt.Sprintf("Jobs 1–%d of %d", queueTopicPage, queueTopicPage+20)
	if !strings.Contains(body, want) {
		t.Errorf("the Queues page does not say %q", want)
	}
	i := strings.Index(body, `href="/queues?cursor=`)
	if i < 0 {
		t.Fatal("the Queues page has no link to its next page")
	}
	next := body[i+len(`href="`):]
	next = strings.ReplaceAll(next[:strings.IndexByte(next, '"')], "&amp;", "&")
	body = ts.do(t, "alice", http.MethodGet, next, "").Body.String()
	if got := strings.Count(body, "<tr data-job="); got != 20 {
		t.Errorf("%s shows %d jobs, want 20", next, got)
	}
	if !strings.Contains(body, fmt.Sprintf("Jobs %d–%d of %d", queueTopicPage+1, queueTopicPage+20, queueTopicPage+20)) ||
		!strings.Contains(body, `hx-get="/queues/live?cursor=`) {
		t.Errorf("%s does not say which jobs it shows or refreshes another page", next)
	}
}
