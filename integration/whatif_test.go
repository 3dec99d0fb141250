package integration

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSimFromDB runs jobs on a real server, then replays them with
// gpuportal sim --from-db against its SQLite file: the "actual" row must
// be the jobs' real JCTs, each policy named must have its row, and the
// export must hold the jobs.
func TestSimFromDB(t *testing.T) {
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

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
