package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// startedJob stores a job of alice's running on placement since start.
func (ts *testServer) startedJob(t testing.TB, name string, gpus int, placement []string, start time.Time) int64 {
	t.Helper()
	return ts.startedJobOf(t, "vision", "alice", name, gpus, placement, start)
}

// startedJobOf stores a job of user's in team running on placement since
// start.
func (ts *testServer) startedJobOf(t testing.TB, team, user, name string, gpus int, placement []string, start time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	j := &models.Job{Name: name, Team: team, User: user, GPUs: gpus, SimDuration: 3600, SubmittedAt: start}
	if err := ts.store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.MarkStarted(ctx, j.ID, placement, start); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// gpuMinutes stores minute history rows of node-0's GPU index from
// minute from to minute to (exclusive) before now, at util.
func (ts *testServer) gpuMinutes(t *testing.T, index int, now time.Time, from, to int, util float64, usedMiB int64) {
	t.Helper()
	var rows []models.GPUHistory
	end := now.Unix() - now.Unix()%60
	for m := from; m > to; m-- {
		rows = append(rows, models.GPUHistory{Step: models.StepMinute, Start: end - int64(m)*60, GPU: "GPU-test-" + string(rune('0'+index)),
			Node: "node-0", GPUIndex: index, Samples: 60, MemMiB: 81920, MemUsedAvgMiB: float64(usedMiB), MemUsedMaxMiB: usedMiB,
			UtilAvgPct: util, BusySamples: 60})
	}
	if err := ts.store.SaveGPUHistory(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

func (ts *testServer) getJob(t *testing.T, role string, id int64) api.Job {
	t.Helper()
	rec := ts.do(t, role, http.MethodGet, "/api/v1/jobs/"+itoa(id), "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET job %d: %d %s", id, rec.Code, rec.Body)
	}
	var j api.Job
	if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestJobUsageAndIdle checks a job's GPU usage and idle verdict from the
// history rows and the live readings, in the API, on the job page and in
// the lists, and that a shared GPU says so and gives the job's own memory.
func TestJobUsageAndIdle(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *testConfig) { c.App.Idle = idle.Rule{After: 2 * time.Minute, BelowPct: 5} })
	now := time.Now()
	start := now.Add(-6 * time.Minute)
	notebook := ts.startedJob(t, "notebook", 1, []string{"node-0:0"}, start)
	train := ts.startedJob(t, "train", 1, []string{"node-0:1"}, start)
	shared := ts.startedJob(t, "shared", 1, []string{"node-0:1"}, start)
	// Minutes of history, then the last 50 seconds live.
	ts.gpuMinutes(t, 0, now, 7, 1, 1, 6000)
	ts.gpuMinutes(t, 1, now, 7, 1, 90, 30000)
	for s := 50; s >= 1; s-- {
		at := now.Add(-time.Duration(s) * time.Second)
		ts.cfg.Telemetry.Record("node-0", []gpu.Sample{
			{At: at, Index: 0, MemMiB: 81920, MemUsedMiB: 6000, UtilPct: 0.5, Jobs: []gpu.JobMem{{JobID: notebook, MemMiB: 6000}}},
			{At: at, Index: 1, MemMiB: 81920, MemUsedMiB: 30000, UtilPct: 92,
				Jobs: []gpu.JobMem{{JobID: train, MemMiB: 20000}, {JobID: shared, MemMiB: 10000}}},
		})
	}

	nb := ts.getJob(t, "alice", notebook)
	if nb.Idle == nil || !nb.Idle.Idle || nb.Idle.Since == nil {
		t.Fatalf("notebook idle = %+v, want idle", nb.Idle)
	}
	if nb.Usage == nil || len(nb.Usage.GPUs) != 1 || nb.Usage.UtilAvgPct == nil || *nb.Usage.UtilAvgPct > 2 {
		t.Fatalf("notebook usage = %+v", nb.Usage)
	}
	if g := nb.Usage.GPUs[0]; g.Shared || g.JobMemMiB == nil || *g.JobMemMiB != 6000 || g.UtilPct == nil || *g.UtilPct != 0.5 {
		t.Errorf("notebook GPU = %+v", g)
	}
	tr := ts.getJob(t, "alice", train)
	if tr.Idle == nil || tr.Idle.Idle || !tr.Idle.Known {
		t.Errorf("train idle = %+v, want known and not idle", tr.Idle)
	}
	g := tr.Usage.GPUs[0]
	if !g.Shared || len(g.SharedWith) != 1 || g.SharedWith[0] != shared || g.JobMemMiB == nil || *g.JobMemMiB != 20000 {
		t.Errorf("train's shared GPU = %+v, want shared with %d and its own 20000 MiB", g, shared)
	}
	if g.UtilAvgPct == nil || *g.UtilAvgPct < 89 || *g.UtilAvgPct > 93 {
		t.Errorf("train's mean utilization = %v, want about 90", g.UtilAvgPct)
	}

	// The points: the minutes, then the live seconds, the job's own memory
	// only where known on a shared GPU.
	rec := ts.do(t, "alice", http.MethodGet, "/api/v1/jobs/"+itoa(train)+"/usage", "")
	var u api.JobUsage
	if err := json.Unmarshal(rec.Body.Bytes(), &u); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("usage: %d %s", rec.Code, rec.Body)
	}
	pts := u.GPUs[0].Points
	if len(pts) < 5 || pts[0].JobMemMiB != nil || pts[len(pts)-1].JobMemMiB == nil {
		t.Errorf("points %+v: want history without the job's own memory, then live with it", pts)
	}
	if rec := ts.do(t, "bob", http.MethodGet, "/api/v1/jobs/"+itoa(train)+"/usage", ""); rec.Code != http.StatusForbidden && rec.Code != http.StatusNotFound {
		t.Errorf("bob reads alice's usage: %d", rec.Code)
	}

	// The same verdict in the list, on the job page, the team and the
	// cluster pages.
	js, _ := ts.listPage(t, "alice", "state=running")
	for _, j := range js {
		if (j.ID == notebook) != (j.Idle != nil && j.Idle.Idle) {
			t.Errorf("list: job %d idle %+v", j.ID, j.Idle)
		}
		if j.ID == notebook && !j.Idle.Since.Equal(*nb.Idle.Since) {
			t.Errorf("list: idle since %v, the job says %v", j.Idle.Since, nb.Idle.Since)
		}
	}
	since := nb.Idle.Text(time.Now(), time.Local)
	since = since[:strings.Index(since, " (")] // "since 12:00:00"
	for _, path := range []string{"/jobs/" + itoa(notebook), "/teams/vision", "/teams/vision/flags", "/cluster"} {
		body := ts.do(t, "lead", http.MethodGet, path, "").Body.String()
		if !strings.Contains(body, since) || !strings.Contains(body, "under 5% utilization") {
			t.Errorf("%s does not say the notebook is idle %s", path, since)
		}
		if flags := section(body, "-idle\""); path != "/jobs/"+itoa(notebook) &&
			(!strings.Contains(flags, `data-job="`+itoa(notebook)+`"`) || strings.Contains(flags, `data-job="`+itoa(train)+`"`)) {
			t.Errorf("%s: idle jobs %q, want the notebook alone", path, flags)
		}
	}
	// The jobs list badges the idle job's row, not the busy ones.
	list := ts.do(t, "alice", http.MethodGet, "/jobs?state=running", "").Body.String()
	for _, id := range []int64{notebook, train, shared} {
		i := strings.Index(list, `" data-job="`+itoa(id)+`"`)
		end := strings.Index(list[max(i, 0):], "</tr>")
		if i < 0 || end < 0 {
			t.Fatalf("the jobs list has no row for job %d", id)
		}
		row := list[i : i+end]
		if got, want := strings.Contains(row, `data-field="idle"`), id == notebook; got != want {
			t.Errorf("jobs list: job %d badged idle %v, want %v: %s", id, got, want, row)
		}
	}
	page := ts.do(t, "alice", http.MethodGet, "/jobs/"+itoa(train), "").Body.String()
	for _, want := range []string{"Shared with job " + itoa(shared), "19.5 GB (its own)", "spark-util"} {
		if !strings.Contains(page, want) {
			t.Errorf("the training job's page lacks %q", want)
		}
	}
	// bob, of another team, sees that a job is idle but not whose.
	if body := ts.do(t, "bob", http.MethodGet, "/cluster", "").Body.String(); !strings.Contains(body, "(team vision)") || strings.Contains(body, "notebook") {
		t.Error("the cluster page shows bob the idle job's name, or no idle job")
	}
}

// TestTeamIdleRule: two batch jobs, of vision and of nlp, hold their GPUs
// at 20% for six minutes; the server's rule (under 5% for 10m) flags
// neither. Once vision sets its own, stricter rule (under 30% for 2m),
// its job is idle on the job's API answer and page, in the API list and
// the jobs list's badge, on the team and cluster pages, and the reclaim
// loop preempts it (vision reclaims idle batch jobs); nlp's job, under
// the server's rule though nlp reclaims batch jobs too, is none of those.
func TestTeamIdleRule(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *testConfig) {
		c.App.Idle = idle.Rule{After: 10 * time.Minute, BelowPct: 5}
		c.App.ReclaimGrace = time.Minute
	})
	ctx := context.Background()
	now := time.Now()
	start := now.Add(-6 * time.Minute)
	vision := ts.startedJobOf(t, "vision", "alice", "vision-train", 1, []string{"node-0:0"}, start)
	nlp := ts.startedJobOf(t, "nlp", "bob", "nlp-train", 1, []string{"node-0:1"}, start)
	ts.gpuMinutes(t, 0, now, 7, 1, 20, 6000)
	ts.gpuMinutes(t, 1, now, 7, 1, 20, 6000)
	for s := 50; s >= 1; s-- {
		at := now.Add(-time.Duration(s) * time.Second)
		ts.cfg.Telemetry.Record("node-0", []gpu.Sample{
			{At: at, Index: 0, MemMiB: 81920, MemUsedMiB: 6000, UtilPct: 20},
			{At: at, Index: 1, MemMiB: 81920, MemUsedMiB: 6000, UtilPct: 20},
		})
	}
	if j := ts.getJob(t, "alice", vision); j.Idle == nil || j.Idle.Idle || j.Idle.BelowPct != 5 || !j.Idle.Known {
		t.Fatalf("vision's job under the server's rule: idle %+v, want known, not idle, under 5%%", j.Idle)
	}
	for team, role := range map[string]string{"vision": "lead", "nlp": "admin"} {
		body := `{"reclaim_sessions":true,"reclaim_batch":true}`
		if team == "vision" {
			body = `{"reclaim_sessions":true,"reclaim_batch":true,"idle_below_pct":30,"idle_after_s":120}`
		}
		if rec := ts.do(t, role, http.MethodPut, "/api/v1/teams/"+team+"/idle-policy", body); rec.Code != http.StatusOK {
			t.Fatalf("set %s's idle policy: %d %s", team, rec.Code, rec.Body)
		}
	}

	v, n := ts.getJob(t, "alice", vision), ts.getJob(t, "bob", nlp)
	if v.Idle == nil || !v.Idle.Idle || v.Idle.BelowPct != 30 || v.Idle.AfterS != 120 || v.Idle.ReclaimAt == nil {
		t.Errorf("vision's job under its team's rule: idle %+v, want idle under 30%% for 120 s, to be reclaimed", v.Idle)
	}
	if n.Idle == nil || n.Idle.Idle || n.Idle.BelowPct != 5 || n.Idle.AfterS != 600 || n.Idle.ReclaimAt != nil {
		t.Errorf("nlp's job under the server's rule: idle %+v, want not idle, under 5%% for 600 s", n.Idle)
	}
	if page := ts.do(t, "alice", http.MethodGet, "/jobs/"+itoa(vision), "").Body.String(); !strings.Contains(page, "under 30% utilization") {
		t.Errorf("vision's job page does not say it is idle under its team's 30%%")
	}
	js, _ := ts.listPage(t, "admin", "state=running")
	if len(js) != 2 {
		t.Fatalf("the API list has %d running jobs, want 2", len(js))
	}
	for _, j := range js {
		if got, want := j.Idle != nil && j.Idle.Idle, j.ID == vision; got != want {
			t.Errorf("API list: job %d (%s) idle %v, want %v", j.ID, j.Team, got, want)
		}
	}
	list := ts.do(t, "admin", http.MethodGet, "/jobs?state=running&scope=all", "").Body.String()
	for _, id := range []int64{vision, nlp} {
		i := strings.Index(list, `" data-job="`+itoa(id)+`"`)
		end := strings.Index(list[max(i, 0):], "</tr>")
		if i < 0 || end < 0 {
			t.Fatalf("the jobs list has no row for job %d", id)
		}
		if got, want := strings.Contains(list[i:i+end], `data-field="idle"`), id == vision; got != want {
			t.Errorf("jobs list: job %d badged idle %v, want %v", id, got, want)
		}
	}
	for _, path := range []string{"/teams/vision", "/teams/nlp", "/cluster"} {
		flags := section(ts.do(t, "admin", http.MethodGet, path, "").Body.String(), "-idle\"")
		if path != "/teams/nlp" && !strings.Contains(flags, `data-job="`+itoa(vision)+`"`) {
			t.Errorf("%s does not flag vision's job idle: %q", path, flags)
		}
		if strings.Contains(flags, `data-job="`+itoa(nlp)+`"`) {
			t.Errorf("%s flags nlp's job idle: %q", path, flags)
		}
	}

	if err := ts.reclaimOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]bool{vision: true, nlp: false} {
		runs, err := ts.store.Runs(ctx, id)
		if err != nil || len(runs) != 1 {
			t.Fatalf("job %d runs %+v, %v", id, runs, err)
		}
		if got := runs[0].ReclaimedAt != nil; got != want {
			t.Errorf("job %d reclaimed %v, want %v", id, got, want)
		}
	}
}

// TestStrandedJobs checks that a queued job that needs more GPUs than its
// user's cap is named on the team page and in the team API, with the cap.
func TestStrandedJobs(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	if err := ts.store.SetTeamShare(ctx, "vision", 2, 1, 2); err != nil {
		t.Fatal(err)
	}
	big := &models.Job{Name: "big", Team: "vision", User: "alice", GPUs: 4, SimDuration: 60, SubmittedAt: time.Now()}
	small := &models.Job{Name: "small", Team: "vision", User: "alice", GPUs: 2, SimDuration: 60, SubmittedAt: time.Now()}
	for _, j := range []*models.Job{big, small} {
		if err := ts.store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	body := ts.do(t, "lead", http.MethodGet, "/teams/vision", "").Body.String()
	stranded := section(body, `id="team-stranded"`)
	if !strings.Contains(stranded, `data-job="`+itoa(big.ID)+`"`) || !strings.Contains(stranded, "needs 4 GPUs; the team&#39;s cap per user is 2") ||
		strings.Contains(stranded, `data-job="`+itoa(small.ID)+`"`) {
		t.Errorf("team page warns %q: want the 4-GPU job named with the team's cap, not the 2-GPU one", stranded)
	}
	if err := ts.store.SetUserCap(ctx, "vision", "alice", 1); err != nil {
		t.Fatal(err)
	}
	rec := ts.do(t, "lead", http.MethodGet, "/api/v1/teams/vision", "")
	var team api.Team
	if err := json.Unmarshal(rec.Body.Bytes(), &team); err != nil {
		t.Fatal(err)
	}
	if len(team.Warnings) != 2 || !strings.Contains(strings.Join(team.Warnings, "\n"), "alice's own cap is 1") {
		t.Errorf("warnings %q: want both jobs, under alice's own cap of 1", team.Warnings)
	}
}

func TestGuaranteeWarning(t *testing.T) {
	t.Parallel()
	teams := func(gs ...int) []api.TeamShare {
		var out []api.TeamShare
		for _, g := range gs {
			out = append(out, api.TeamShare{GuaranteeGPUs: g})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		teams   []api.TeamShare
		cluster int
		want    string
	}{
		{"within", teams(4, 4), 8, ""},
		{"beyond", teams(4, 6), 8, "add up to 10 GPUs, more than the cluster's 8"},
		{"no machine yet", teams(4, 6), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := guaranteeWarning(tc.teams, tc.cluster)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// section is body from the element whose opening tag holds marker to the
// end of that element's first </div>.
func section(body, marker string) string {
	i := strings.Index(body, marker)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], "</div>")
	if j < 0 {
		return body[i:]
	}
	return body[i : i+j]
}

// TestJobUsageNotSharedWithItsPredecessor: a job that starts on a GPU
// the second another job ended there is not "shared with" that job. The
// reading of the second both touched lists the job that ended (and the
// agent may report its memory a second more); an audit saw job 19's page
// say "Shared with job 2" for its whole run, job 2 having succeeded
// 15 ms before job 19 started on node-0:1. A neighbour counts only in
// readings that list the job itself.
func TestJobUsageNotSharedWithItsPredecessor(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	now := time.Now()
	start := now.Add(-30 * time.Second)
	ctx := context.Background()
	b := &models.Job{Name: "before", Team: "vision", User: "bob", GPUs: 1, SimDuration: 300, SubmittedAt: now.Add(-5 * time.Minute)}
	if err := ts.store.CreateJob(ctx, b); err != nil {
		t.Fatal(err)
	}
	run, err := ts.store.MarkStarted(ctx, b.ID, []string{"node-0:2"}, b.SubmittedAt)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.store.MarkStopped(ctx, job.RunRef{Job: b.ID, Run: run}, models.JobSucceeded, nil, "", usage.Service{}, start.Add(-15*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	before := b.ID
	after := ts.startedJob(t, "after", 1, []string{"node-0:2"}, start)
	for s := 31; s >= 1; s-- {
		at := now.Add(-time.Duration(s) * time.Second)
		jobs := []gpu.JobMem{{JobID: after, MemMiB: 20000}}
		if s >= 30 { // the ended job's memory, still reported
			jobs = []gpu.JobMem{{JobID: before, MemMiB: 9000}}
		}
		ts.cfg.Telemetry.Record("node-0", []gpu.Sample{{At: at, Index: 2, MemMiB: 81920, MemUsedMiB: 20000, UtilPct: 95, Jobs: jobs}})
	}
	j := ts.getJob(t, "alice", after)
	if j.Usage == nil || len(j.Usage.GPUs) != 1 {
		t.Fatalf("usage = %+v", j.Usage)
	}
	if g := j.Usage.GPUs[0]; g.Shared || len(g.SharedWith) != 0 {
		t.Errorf("GPU = shared %v with %v, want not shared: job %d had ended", g.Shared, g.SharedWith, before)
	}
}
