package integration

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	apitypes "github.com/gpuportal/gpuportal/api"
)

// usageRun is how long TestUsageAgrees watches the demo.
const usageRun = 18 * time.Second

// TestUsageAgrees runs the demo with a short idle time and, every few
// seconds while jobs run, reads each followed job's GPU utilization and
// idle verdict from GET /api/v1/jobs/{id}, its page and "gpuportal job
// show": the mean utilization over the run, read between two API reads,
// lies between them on the page and in the CLI; the idle verdict and its
// since-when are the same in all three. The demo's notebook (it barely
// uses its GPU) is flagged idle, on its team's page and the cluster page
// too; training jobs never are.
func TestUsageAgrees(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--demo", "--data", t.TempDir(), "--idle-after", "10s")
	admin := newAPI(t, srv.URL, "admin", "dev")
	b := newBrowser(t, srv.URL)
	b.login("admin", "dev")
	cl := newCLI(t, srv.URL)
	env := []string{"GPUPORTAL_TOKEN=" + admin.token}

	var notebook int64
	eventually(t, 20*time.Second, "the demo's notebook to run", func() bool {
		var js []apitypes.Job
		admin.do(http.MethodGet, "/api/v1/jobs?scope=all&state=running&q=notebook", nil, &js)
		if len(js) > 0 {
			notebook = js[0].ID
		}
		return notebook != 0
	})
	checks, idleSeen, rounds := 0, 0, 0
	for deadline := time.Now().Add(usageRun); time.Now().Before(deadline); rounds++ {
		var running []apitypes.Job
		admin.do(http.MethodGet, "/api/v1/jobs?scope=all&state=running&limit=3", nil, &running)
		follow := []int64{notebook}
		for _, j := range running {
			if j.ID != notebook {
				follow = append(follow, j.ID)
			}
		}
		for _, id := range follow {
			before := readUsage(t, admin, id)
			_, page := b.get(fmt.Sprintf("/jobs/%d", id))
			out := cl.ok(env, "job", "show", strconv.FormatInt(id, 10))
			after := readUsage(t, admin, id)
			if before.State != "running" || after.State != "running" || before.Usage == nil || after.Usage == nil ||
				before.Usage.UtilAvgPct == nil || after.Usage.UtilAvgPct == nil {
				continue // not yet read, or no longer running
			}
			lo, hi := utilRange(before, after)
			if v, ok := pagePct(page, `mean utilization (\d+)%`); ok {
				checks++
				if v < lo || v > hi {
					t.Errorf("job %d: page says mean utilization %d%%, the API %d%%..%d%%", id, v, lo, hi)
				}
			} else {
				t.Errorf("job %d's page shows no mean utilization", id)
			}
			if v, ok := pagePct(out, `utilization:\s+(\d+)% mean over the run`); ok {
				checks++
				if v < lo || v > hi {
					t.Errorf("job %d: job show says mean utilization %d%%, the API %d%%..%d%%", id, v, lo, hi)
				}
			} else {
				t.Errorf("gpuportal job show %d printed no utilization:\n%s", id, out)
			}
			if (before.Idle != nil && before.Idle.Idle) != (after.Idle != nil && after.Idle.Idle) {
				continue // it changed between the reads
			}
			idle := after.Idle != nil && after.Idle.Idle
			onPage := strings.Contains(page, `id="job-idle"`)
			inCLI := regexp.MustCompile(`(?m)^\s+idle:`).MatchString(out)
			checks++
			if onPage != idle || inCLI != idle {
				t.Errorf("job %d: idle in the API %v, on its page %v, in job show %v", id, idle, onPage, inCLI)
			}
			if !idle {
				// A sharing job may wait for its lane: only whole-GPU
				// training jobs are sure to keep their GPUs busy, once
				// past their first seconds (the GPU reads 0 until the
				// agent has started the job).
				old := after.Usage.To.Sub(after.Usage.From) >= 20*time.Second
				if id != notebook && !after.Sharing && old && *after.Usage.UtilAvgPct < 50 {
					t.Errorf("training job %d: mean utilization %.1f%%", id, *after.Usage.UtilAvgPct)
				}
				continue
			}
			if id != notebook && !after.Sharing {
				t.Errorf("training job %d flagged idle: %+v", id, after.Idle)
			}
			idleSeen++
			since := "since " + after.Idle.Since.Local().Format("15:04:05")
			if !strings.Contains(page, since) || !strings.Contains(out, since) {
				t.Errorf("job %d idle %s in the API; its page or job show says otherwise:\n%s", id, since, out)
			}
		}
		time.Sleep(2 * time.Second) // about time: rounds of readings over usageRun, the demo changing between them
	}
	if idleSeen == 0 {
		t.Errorf("the notebook (job %d) was never seen idle in %v", notebook, usageRun)
	}
	for _, path := range []string{"/teams/vision", "/cluster"} {
		if _, page := b.get(path); !strings.Contains(page, fmt.Sprintf(`data-job="%d"`, notebook)) || !strings.Contains(page, "notebook-alice") {
			t.Errorf("%s does not flag the idle notebook", path)
		}
	}
	t.Logf("%d rounds, %d cross-checks, the notebook seen idle %d times", rounds, checks, idleSeen)
}

func readUsage(t *testing.T, a *api, id int64) apitypes.Job {
	t.Helper()
	var j apitypes.Job
	if st := a.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK {
		t.Fatalf("GET job %d: %d", id, st)
	}
	return j
}

// utilRange bounds the mean utilization over the run that a reading
// taken between readings a and b may show, in whole percents. A mean
// over the run is not monotonic: each second's reading (0 to 100) moves
// it by at most 100/(seconds run) points, so the bounds widen by that
// for each second between a and b, and by 1 for the rounding.
func utilRange(a, b apitypes.Job) (lo, hi int) {
	va, vb := pctOf(a.Usage.UtilAvgPct), pctOf(b.Usage.UtilAvgPct)
	run := max(1, a.Usage.To.Sub(a.Usage.From).Seconds())
	gap := b.Usage.To.Sub(a.Usage.To).Seconds()
	slack := 1 + int(math.Ceil(100*gap/run))
	return min(va, vb) - slack, max(va, vb) + slack
}

func pctOf(v *float64) int {
	if v == nil {
		return -1
	}
	return int(math.Round(*v))
}

func pagePct(text, pattern string) (int, bool) {
	m := regexp.MustCompile(pattern).FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}
