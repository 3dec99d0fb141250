package integration

import (
	"encoding/csv"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	apitypes "github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestAccounting runs jobs with known GPUs and durations through the real
// server, on SQLite and on PostgreSQL, and checks that the accounting API
// says the GPU-hours their runs held (their attained service, GPUs x time
// run), that users add up to teams and teams to the cluster, that the CSV
// holds the same rows, that each role sees what it may (403 beyond), and
// that the CLI and the page show the report.
func TestAccounting(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	for _, db := range []struct {
		name string
		dsn  func(t *testing.T) string
	}{
		{"sqlite", func(*testing.T) string { return "" }},
		{"postgres", func(t *testing.T) string { return modelstest.PostgresDSN(t) }},
	} {
		t.Run(db.name, func(t *testing.T) {
			args := []string{"--data", t.TempDir()}
			if dsn := db.dsn(t); dsn != "" {
				args = append(args, "--db", dsn)
			}
			srv := startServer(t, args...)
			checkAccounting(t, srv)
		})
	}
	t.Run("demo", checkAccountingDemo)
}

// checkAccountingDemo replays the demo workload for a few seconds, jobs
// running, sharing GPUs and waiting, and checks that the report adds up
// and that its allocated GPU-hours lie between what the job records say:
// at least the attained service of the jobs that do not share (read
// before the report), at most that of all jobs (read after), a sharing
// job holding only its share of its GPU.
func checkAccountingDemo(t *testing.T) {
	srv := startServer(t, "--demo", "--data", t.TempDir())
	admin := newAPI(t, srv.URL, "admin", "dev")
	time.Sleep(demoAccountingRun) // about time: the demo's workload runs this long
	attained := func(sharing bool) float64 {
		var js []apitypes.Job
		if st := admin.do(http.MethodGet, "/api/v1/jobs?scope=all&limit=1000", nil, &js); st != http.StatusOK {
			t.Fatalf("jobs: status %d", st)
		}
		sum := 0.0
		for _, j := range js {
			if sharing || !j.Sharing {
				sum += j.AttainedService / 3600
			}
		}
		return sum
	}
	low := attained(false)
	var teams, users apitypes.Accounting
	admin.do(http.MethodGet, "/api/v1/accounting?by=team&period=range", nil, &teams)
	admin.do(http.MethodGet, "/api/v1/accounting?by=user&period=day", nil, &users)
	high := attained(true)
	if high <= 0 || teams.Total.AllocatedGPUHours < low-1e-3 || teams.Total.AllocatedGPUHours > high+1e-3 {
		t.Errorf("allocated %.4f GPU-hours; the jobs that do not share attained %.4f before, all jobs %.4f after", teams.Total.AllocatedGPUHours, low, high)
	}
	sum := 0.0
	for _, r := range teams.Rows {
		sum += r.AllocatedGPUHours
		members := 0.0
		for _, u := range users.Rows {
			if u.Team == r.Team {
				members += u.AllocatedGPUHours
			}
		}
		if math.Abs(members-r.AllocatedGPUHours) > 2e-3 {
			t.Errorf("team %s: %.4f GPU-hours; its users add up to %.4f", r.Team, r.AllocatedGPUHours, members)
		}
	}
	if math.Abs(sum-teams.Total.AllocatedGPUHours) > 2e-3 || len(teams.Rows) < 2 {
		t.Errorf("%d teams add up to %.4f GPU-hours, the cluster has %.4f", len(teams.Rows), sum, teams.Total.AllocatedGPUHours)
	}
	t.Logf("demo after %v: %.4f GPU-hours allocated (non-sharing jobs %.4f, all jobs %.4f), %d jobs started", demoAccountingRun, teams.Total.AllocatedGPUHours, low, high, teams.Total.JobsStarted)
}

// demoAccountingRun is how long the demo runs before its report is read.
const demoAccountingRun = 10 * time.Second

func checkAccounting(t *testing.T, srv *server) {
	admin := newAPI(t, srv.URL, "admin", "dev")
	alice := newAPI(t, srv.URL, "alice", "dev") // vision
	bob := newAPI(t, srv.URL, "bob", "dev")     // nlp
	lead := newAPI(t, srv.URL, "lead", "dev")   // vision

	ids := []int64{
		submit(t, alice, map[string]any{"name": "a2", "gpus": 2, "sim": map[string]any{"duration_s": 3}}),
		submit(t, alice, map[string]any{"name": "a1", "gpus": 1, "sim": map[string]any{"duration_s": 2}}),
		submit(t, bob, map[string]any{"name": "b1", "gpus": 1, "sim": map[string]any{"duration_s": 4}}),
	}
	long := submit(t, bob, map[string]any{"name": "b-long", "gpus": 1, "sim": map[string]any{"duration_s": 600}})
	ids = append(ids, long)
	eventually(t, 30*time.Second, "the long job to run a second", func() bool {
		var j apitypes.Job
		bob.do(http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(long, 10), nil, &j)
		return j.State == "running" && j.ExecutedS >= 1
	})
	if st := bob.do(http.MethodDelete, "/api/v1/jobs/"+strconv.FormatInt(long, 10), nil, nil); st != http.StatusOK && st != http.StatusAccepted {
		t.Fatalf("cancel: status %d", st)
	}
	var attained = map[string]float64{} // team -> GPU-hours
	var total float64
	eventually(t, 40*time.Second, "every job to finish", func() bool {
		attained, total = map[string]float64{}, 0
		for _, id := range ids {
			var j apitypes.Job
			admin.do(http.MethodGet, "/api/v1/jobs/"+strconv.FormatInt(id, 10), nil, &j)
			if !j.State.Final() {
				return false
			}
			attained[j.Team] += j.AttainedService / 3600
			total += j.AttainedService / 3600
		}
		return true
	})

	get := func(a *api, query string) (apitypes.Accounting, int) {
		var rep apitypes.Accounting
		st := a.do(http.MethodGet, "/api/v1/accounting?"+query, nil, &rep)
		return rep, st
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 2e-3 }
	teams, st := get(admin, "by=team&period=day")
	if st != http.StatusOK {
		t.Fatalf("by team: status %d", st)
	}
	users, _ := get(admin, "by=user&period=month")
	if !near(teams.Total.AllocatedGPUHours, total) || !near(users.Total.AllocatedGPUHours, total) {
		t.Errorf("allocated %.4f GPU-hours by team, %.4f by user; the jobs' runs held %.4f", teams.Total.AllocatedGPUHours, users.Total.AllocatedGPUHours, total)
	}
	sumTeams := 0.0
	for _, r := range teams.Rows {
		sumTeams += r.AllocatedGPUHours
		if !near(r.AllocatedGPUHours, attained[r.Team]) {
			t.Errorf("team %s: %.4f GPU-hours allocated; its jobs' runs held %.4f", r.Team, r.AllocatedGPUHours, attained[r.Team])
		}
		sumUsers := 0.0
		for _, u := range users.Rows {
			if u.Team == r.Team {
				sumUsers += u.AllocatedGPUHours
			}
		}
		if !near(sumUsers, r.AllocatedGPUHours) {
			t.Errorf("team %s: its users add up to %.4f GPU-hours, the team has %.4f", r.Team, sumUsers, r.AllocatedGPUHours)
		}
		if r.UsedGPUHours > r.AllocatedGPUHours+1e-3 || !near(r.UsedGPUHours+r.IdleGPUHours+r.UnsampledGPUHours, r.AllocatedGPUHours) {
			t.Errorf("team %s: used %.4f + idle %.4f + unsampled %.4f is not the %.4f allocated", r.Team, r.UsedGPUHours, r.IdleGPUHours, r.UnsampledGPUHours, r.AllocatedGPUHours)
		}
	}
	if !near(sumTeams, teams.Total.AllocatedGPUHours) || teams.Scope != "cluster" {
		t.Errorf("teams add up to %.4f, the cluster (%s) has %.4f", sumTeams, teams.Scope, teams.Total.AllocatedGPUHours)
	}
	if j := teams.Total.Jobs; j["succeeded"] != 3 || j["cancelled"] != 1 || teams.Total.JobsStarted != 4 {
		t.Errorf("jobs %v, %d started; want 3 succeeded, 1 cancelled, 4 started", j, teams.Total.JobsStarted)
	}

	// The CSV holds the same rows.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/accounting?by=user&period=month&format=csv", nil)
	req.Header.Set("Authorization", "Bearer "+admin.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(resp.Body).ReadAll()
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("CSV: status %d, %s, %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	if len(recs) != len(users.Rows)+1 || recs[0][3] != "allocated_gpu_hours" {
		t.Fatalf("CSV has %d lines (header %v), want %d rows", len(recs), recs[0], len(users.Rows))
	}
	csvSum := 0.0
	for _, r := range recs[1:] {
		v, _ := strconv.ParseFloat(r[3], 64)
		csvSum += v
	}
	if !near(csvSum, users.Total.AllocatedGPUHours) {
		t.Errorf("the CSV's allocated GPU-hours add up to %.4f, the report's total is %.4f", csvSum, users.Total.AllocatedGPUHours)
	}

	// Each role sees what it may.
	for _, tc := range []struct {
		who    string
		a      *api
		query  string
		status int
		scope  string
	}{
		{"a researcher by user", alice, "by=user", http.StatusOK, "user alice"},
		{"a researcher by team", alice, "by=team", http.StatusForbidden, ""},
		{"a researcher asking for another user", alice, "by=user&user=bob", http.StatusForbidden, ""},
		{"a lead", lead, "by=user", http.StatusOK, "team vision"},
		{"a lead asking for another team", lead, "team=nlp", http.StatusForbidden, ""},
		{"a lead asking for another team's member", lead, "by=user&user=bob", http.StatusForbidden, ""},
		{"no token", &api{t: t, base: srv.URL}, "", http.StatusUnauthorized, ""},
		{"a bad day", admin.malformed(), "from=yesterday", http.StatusBadRequest, ""},
	} {
		rep, st := get(tc.a, tc.query)
		if st != tc.status || rep.Scope != tc.scope {
			t.Errorf("%s: status %d scope %q; want %d %q", tc.who, st, rep.Scope, tc.status, tc.scope)
		}
		for _, r := range rep.Rows {
			if (tc.scope == "user alice" && r.User != "alice") || (tc.scope == "team vision" && r.Team != "vision") {
				t.Errorf("%s sees %s/%s", tc.who, r.Team, r.User)
			}
		}
	}

	// The CLI.
	cl := newCLI(t, srv.URL)
	out, errOut, code := cl.run([]string{"GPUPORTAL_TOKEN=" + admin.token}, "accounting", "--by", "team")
	if code != 0 || !strings.Contains(out, "TOTAL") || !strings.Contains(out, "vision") || !strings.Contains(out, "nlp") {
		t.Errorf("gpuportal accounting: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = cl.run([]string{"GPUPORTAL_TOKEN=" + admin.token}, "accounting", "--by", "user", "--csv")
	if code != 0 || !strings.HasPrefix(out, "period,team,user,allocated_gpu_hours") {
		t.Errorf("gpuportal accounting --csv: exit %d\n%s", code, out)
	}
	_, errOut, code = cl.run([]string{"GPUPORTAL_TOKEN=" + admin.token}, "accounting", "--from", "last-week")
	if code == 0 || !strings.Contains(errOut, "--from") {
		t.Errorf("a bad --from: exit %d, %q", code, errOut)
	}
	_, errOut, code = cl.run([]string{"GPUPORTAL_TOKEN=" + alice.token}, "accounting", "--by", "team")
	if code == 0 || !strings.Contains(errOut, "researcher sees only their own usage") {
		t.Errorf("a researcher by team: exit %d, %q", code, errOut)
	}

	// The page, linked from the header, and its CSV download.
	b := newBrowser(t, srv.URL)
	b.login("lead", "dev")
	st, body := b.get("/accounting?by=user")
	if st != http.StatusOK || !strings.Contains(body, `href="/accounting"`) || !strings.Contains(body, `id="csv"`) ||
		!strings.Contains(body, `data-user="alice"`) || strings.Contains(body, `data-user="bob"`) {
		t.Errorf("the lead's accounting page: status %d\n%s", st, body)
	}
	st, body = b.get("/accounting?by=user&format=csv")
	if st != http.StatusOK || !strings.HasPrefix(body, "period,team,user") || strings.Contains(body, ",bob,") {
		t.Errorf("the lead's CSV: status %d\n%s", st, body)
	}
}
