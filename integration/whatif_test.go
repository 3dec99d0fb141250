package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestSimFromDB runs jobs on a real server, then replays them with
// gpuportal sim --from-db against its SQLite file: the "actual" row must
// be the jobs' real JCTs, each policy named must have its row, and the
// export must hold the jobs.
func TestSimFromDB(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data := t.TempDir()
	srv := startServer(t, "--data", data, "--sim-gpus", "1x2x16", "--max-retries", "0")
	alice := newAPI(t, srv.URL, "alice", "dev")
	bob := newAPI(t, srv.URL, "bob", "dev")
	admin := newAPI(t, srv.URL, "admin", "dev")
	// Five 1-GPU jobs on 2 GPUs: some wait.
	var ids []int64
	for i, who := range []*api{alice, bob, alice, bob, alice} {
		ids = append(ids, submit(t, who, map[string]any{"name": "w", "gpus": 1, "sim": map[string]any{"duration_s": 1 + i%2}}))
	}
	var jcts []float64
	teams := map[string][]float64{}
	for _, id := range ids {
		j := admin.waitState(id, 60*time.Second, "succeeded")
		jct := j.FinishedAt.Sub(j.SubmittedAt).Seconds()
		jcts = append(jcts, jct)
		teams[j.Team] = append(teams[j.Team], jct)
	}
	// The API's replay of the same jobs, checked against web/openapi.json
	// by the contract check.
	var apiRep struct {
		Jobs int `json:"jobs"`
		Rows []struct {
			Name string `json:"name"`
		} `json:"rows"`
	}
	if st := admin.do("GET", "/api/v1/whatif?days=1&policy=fifo,srsf", nil, &apiRep); st != 200 || apiRep.Jobs != len(ids) || len(apiRep.Rows) != 3 {
		t.Errorf("GET /api/v1/whatif: status %d, %+v", st, apiRep)
	}
	t.Run("page", func(t *testing.T) { checkWhatIfPage(t, srv.URL, len(ids)) })
	srv.stop()

	export := filepath.Join(t.TempDir(), "history.csv")
	cmd := exec.Command(binary, "sim", "--from-db", "--data", data, "--days", "1",
		"--policy", "fifo,tiresias-l,srsf", "--thresholds", "200,800", "--json", "--export", export)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sim --from-db: %v\n%s", err, stderr.String())
	}
	var rep struct {
		Jobs int `json:"jobs"`
		GPUs int `json:"gpus"`
		Rows []struct {
			Name     string  `json:"name"`
			Jobs     int     `json:"jobs"`
			Finished int     `json:"finished"`
			AvgJCTS  float64 `json:"avg_jct_s"`
			Teams    []struct {
				Team    string  `json:"team"`
				AvgJCTS float64 `json:"avg_jct_s"`
			} `json:"teams"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("sim --from-db --json: %v\n%s", err, out)
	}
	if rep.Jobs != len(ids) || rep.GPUs != 2 || len(rep.Rows) != 4 {
		t.Fatalf("report: %d jobs on %d GPUs, %d rows; want %d jobs on 2 GPUs, 4 rows:\n%s", rep.Jobs, rep.GPUs, len(rep.Rows), len(ids), out)
	}
	for i, want := range []string{"actual", "fifo", "tiresias-l", "srsf"} {
		if r := rep.Rows[i]; r.Name != want || r.Jobs != len(ids) || r.Finished != len(ids) {
			t.Errorf("row %d: %s, %d jobs, %d finished; want %s, %d, %d", i, r.Name, r.Jobs, r.Finished, want, len(ids), len(ids))
		}
	}
	if got, want := rep.Rows[0].AvgJCTS, mean(jcts); math.Abs(got-want) > 0.01 {
		t.Errorf("actual avg JCT %.3f s, the jobs' real JCTs average %.3f s", got, want)
	}
	for _, tr := range rep.Rows[0].Teams {
		if want := mean(teams[tr.Team]); math.Abs(tr.AvgJCTS-want) > 0.01 {
			t.Errorf("actual avg JCT of team %s: %.3f s, real %.3f s", tr.Team, tr.AvgJCTS, want)
		}
	}
	if len(rep.Rows[0].Teams) != 2 {
		t.Errorf("actual row's teams: %+v, want vision and nlp", rep.Rows[0].Teams)
	}
	csv, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(csv)), "\n"); len(lines) != len(ids)+1 || !strings.HasPrefix(lines[0], "id,") {
		t.Errorf("export: %d lines, want a header and %d jobs:\n%s", len(lines), len(ids), csv)
	}

	// The table names the policies too.
	table, err := exec.Command(binary, "sim", "--from-db", "--data", data, "--days", "1", "--policy", "fifo,tiresias-g").CombinedOutput()
	if err != nil {
		t.Fatalf("sim --from-db: %v\n%s", err, table)
	}
	for _, s := range []string{"actual", "fifo", "tiresias-g", "team nlp avg JCT s"} {
		if !strings.Contains(string(table), s) {
			t.Errorf("table lacks %q:\n%s", s, table)
		}
	}
}

// checkWhatIfPage has the admin replay the jobs on the what-if page in a
// browser, at a laptop's and a phone's width: the table and the CDF chart
// show, with no console error and nothing wider than the window.
// Screenshots go to $GPUPORTAL_SCREENSHOTS.
func checkWhatIfPage(t *testing.T, base string, jobs int) {
	browser := newTabFor(t, 2*time.Minute)
	startChromium(t, browser)
	for _, vp := range viewports {
		sc := tabAs(t, browser, base, "admin", vp)
		ctx := sc.ctx
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/admin/whatif"), chromedp.WaitVisible(`form[action="/admin/whatif"]`)); err != nil {
			t.Fatalf("what-if page: %v", err)
		}
		step := formStep{"replay the last day", "/admin/whatif", map[string]string{"days": "1", "thresholds": "200,800"}, 200,
			fmt.Sprintf("%d jobs finished in the last 1 day", jobs)}
		if err := submitForm(sc, step); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.WaitVisible(`#whatif-cdf .uplot`)); err != nil {
			t.Fatalf("the CDF chart: %v", err)
		}
		problems, err := sc.judge(vp, 200)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("what-if at %s: %s", vp.name, p)
		}
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#whatif tbody tr")].map(r => r.dataset.policy)`))
		if err != nil || strings.Join(rows, ",") != "actual,fifo,tiresias-l,tiresias-g" {
			t.Errorf("rows %v, %v; want actual, then the ticked policies in the form's order", rows, err)
		}
		screenshot(t, ctx, "whatif-admin-"+vp.name)
	}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
