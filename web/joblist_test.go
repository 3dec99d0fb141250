package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/models"
)

// addJobs stores n finished jobs of user in team, named name-0...
func (ts *testServer) addJobs(t testing.TB, n int, name, team, user string, command []string) []int64 {
	t.Helper()
	ctx := context.Background()
	ids := make([]int64, n)
	for i := range n {
		j := &models.Job{Name: fmt.Sprintf("%s-%d", name, i), Team: team, User: user, GPUs: 1, SimDuration: 60,
			Command: command, SubmittedAt: time.Now()}
		if err := ts.store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		ids[i] = j.ID
	}
	return ids
}

// listPage gets one page of the jobs API as role.
func (ts *testServer) listPage(t *testing.T, role, query string) ([]api.Job, http.Header) {
	t.Helper()
	rec := ts.do(t, role, http.MethodGet, "/api/v1/jobs?"+query, "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/jobs?%s: %d %s", query, rec.Code, rec.Body)
	}
	var js []api.Job
	if err := json.Unmarshal(rec.Body.Bytes(), &js); err != nil {
		t.Fatal(err)
	}
	return js, rec.Header()
}

// TestJobListCursorWhileInserting pages through the jobs list while jobs
// are submitted between pages: every job that existed at the start is
// seen exactly once, in ID order, newest first, and the previous-page
// cursor leads back to the same page.
func TestJobListCursorWhileInserting(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	before := ts.addJobs(t, 23, "old", "vision", "alice", nil)
	seen := map[int64]int{}
	var order []int64
	q := url.Values{"limit": {"5"}}
	var pages [][]api.Job
	for i := 0; ; i++ {
		js, h := ts.listPage(t, "alice", q.Encode())
		pages = append(pages, js)
		for _, j := range js {
			seen[j.ID]++
			order = append(order, j.ID)
		}
		ts.addJobs(t, 3, fmt.Sprintf("new%d", i), "vision", "alice", nil) // submitted meanwhile
		next := h.Get(headerNextCursor)
		if next == "" {
			break
		}
		if !strings.Contains(h.Get("Link"), `rel="next"`) {
			t.Fatalf("Link %q lacks rel=next", h.Get("Link"))
		}
		q.Set("cursor", next)
		if i > 10 {
			t.Fatal("the cursor never ends")
		}
	}
	for _, id := range before {
		if seen[id] != 1 {
			t.Errorf("job %d seen %d times, want once", id, seen[id])
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i] >= order[i-1] {
			t.Fatalf("not newest first: %v", order)
		}
	}
	if len(pages) != 5 || len(pages[4]) != 3 {
		t.Errorf("pages of %d: got %d pages, the last of %d", 5, len(pages), len(pages[len(pages)-1]))
	}
	// Back from the third page to the second.
	q.Set("cursor", app.JobCursor('b', pages[1][len(pages[1])-1].ID))
	_, h := ts.listPage(t, "alice", q.Encode())
	q.Set("cursor", h.Get(headerPrevCursor))
	back, _ := ts.listPage(t, "alice", q.Encode())
	if len(back) != 5 || back[0].ID != pages[1][0].ID || back[4].ID != pages[1][4].ID {
		t.Errorf("previous page: got %v, want the second page %v", ids(back), ids(pages[1]))
	}
}

func ids(js []api.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// TestJobListFilters checks each filter of the jobs list, alone and
// together, and who may use which.
func TestJobListFilters(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	train := ts.addJobs(t, 3, "resnet", "vision", "alice", []string{"python", "train.py", "--lr", "0.1"})
	bert := ts.addJobs(t, 2, "BERT-large", "nlp", "bob", []string{"python", "finetune.py"})
	sims := ts.addJobs(t, 2, "sweep_50%", "vision", "lead", nil)
	if err := ts.store.Cancel(context.Background(), sims[0], "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, role, query string
		want              []int64
	}{
		{"admin sees all", "admin", "scope=all", newest(sims, bert, train)},
		{"a researcher sees the team", "alice", "", newest(sims, train)},
		{"by user", "alice", "user=lead", newest(sims)},
		{"by team, admin", "admin", "scope=all&team=nlp", newest(bert)},
		{"by state", "admin", "scope=all&state=cancelled", sims[:1]},
		{"by states", "admin", "scope=all&state=cancelled,queued", newest(sims, bert, train)},
		{"by kind command", "alice", "kind=command", newest(train)},
		{"by kind sim", "alice", "kind=sim", newest(sims)},
		{"by queue", "alice", "queue=0", newest(sims, train)},
		{"by queue, none", "alice", "queue=3", nil},
		{"search name, any case", "admin", "scope=all&q=bert", newest(bert)},
		{"search command", "alice", "q=train.py", newest(train)},
		{"search by ID or text", "admin", fmt.Sprintf("scope=all&q=%d&team=nlp", bert[1]), bert[1:]},
		{"search by #ID only", "admin", fmt.Sprintf("scope=all&q=%%23%d", bert[0]), bert[:1]},
		{"search wildcard is literal", "alice", "q=50%25", newest(sims)},
		{"search underscore is literal", "alice", "q=w_ep", nil},
		{"search outside the team", "alice", "q=bert", nil},
		{"filters together", "admin", "scope=all&team=vision&kind=command&q=RESNET-2", train[2:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, _ := ts.listPage(t, tc.role, tc.query)
			if got := ids(js); fmt.Sprint(got) != fmt.Sprint(nilIfEmpty(tc.want)) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func newest(parts ...[]int64) []int64 {
	var out []int64
	for i := len(parts) - 1; i >= 0; i-- {
		out = append(out, parts[i]...)
	}
	// newest first
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func nilIfEmpty(v []int64) []int64 {
	if len(v) == 0 {
		return []int64{}
	}
	return v
}

// TestJobListBadInput checks that a bad list request gets a 4xx that
// names the parameter at fault.
func TestJobListBadInput(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.addJobs(t, 2, "j", "vision", "alice", nil)
	for _, tc := range []struct {
		name, role, query string
		code              int
		field             string
	}{
		{"limit not a number", "alice", "limit=ten", 400, "limit"},
		{"limit zero", "alice", "limit=0", 400, "limit"},
		{"limit too large", "alice", "limit=1001", 400, "limit"},
		{"unknown state", "alice", "state=sleeping", 400, "state"},
		{"one unknown state of two", "alice", "state=queued,zombie", 400, "state"},
		{"unknown scope", "alice", "scope=everything", 400, "scope"},
		{"all for a researcher", "alice", "scope=all", 403, "scope"},
		{"another team", "alice", "team=nlp", 403, "team"},
		{"another user with mine", "alice", "scope=mine&user=lead", 400, "user"},
		{"queue not a number", "alice", "queue=high", 400, "queue"},
		{"queue negative", "alice", "queue=-1", 400, "queue"},
		{"unknown kind", "alice", "kind=notebook", 400, "kind"},
		{"query too long", "alice", "q=" + strings.Repeat("x", 201), 400, "q"},
		{"cursor garbage", "alice", "cursor=%21%21", 400, "cursor"},
		{"cursor of no direction", "alice", "cursor=" + url.QueryEscape(app.JobCursor('z', 3)), 400, "cursor"},
		{"cursor of no number", "alice", "cursor=YXh5", 400, "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/api/v1/jobs?", "/jobs?"} {
				rec := ts.do(t, tc.role, http.MethodGet, path+tc.query, "")
				if rec.Code != tc.code || !strings.Contains(strings.ToLower(rec.Body.String()), tc.field+":") {
					t.Errorf("%s%s: %d %s, want %d naming %s", path, tc.query, rec.Code, rec.Body, tc.code, tc.field)
				}
			}
		})
	}
}

// TestJobsPagePager checks that the Jobs page pages without JavaScript:
// plain links to the older and newer pages that keep the filters.
func TestJobsPagePager(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ts.addJobs(t, 7, "page", "vision", "alice", nil)
	rec := ts.do(t, "alice", http.MethodGet, "/jobs?limit=3&q=page", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []string{`rel="next"`, `limit=3`, `q=page`, `name="q" value="page"`, `page-6`, `page-4`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, `page-3<`) || strings.Contains(body, `rel="prev"`) {
		t.Error("the first page shows an older job or a link to newer jobs")
	}
}
