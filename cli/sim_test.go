package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sixtyJobs = "../testdata/traces/tiresias-60job.csv"

// run runs gpuportal with args, writing to stdout and stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return jobCmd{stdout: stdout, stderr: stderr}.execute(ctx, args)
}

func TestSimCommand(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "cdf.svg")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"sim", "--trace", sixtyJobs, "--cluster", "4x8",
		"--policy", "fifo,tiresias-l", "--json", "--plot", svg}, &out, &errOut)
	if err != nil {
		t.Fatalf("sim: %v\n%s", err, errOut.String())
	}
	var rows []struct {
		Policy   string  `json:"policy"`
		Jobs     int     `json:"jobs"`
		Finished int     `json:"finished"`
		AvgJCT   float64 `json:"avg_jct_s"`
		Util     float64 `json:"gpu_utilization"`
	}
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	if len(rows) != 2 || rows[0].Policy != "fifo" || rows[1].Policy != "tiresias-l" {
		t.Fatalf("rows = %+v", rows)
	}
	for _, r := range rows {
		if r.Jobs != 60 || r.Finished != 60 || r.AvgJCT <= 0 || r.Util <= 0 || r.Util > 1 {
			t.Errorf("%s: %+v", r.Policy, r)
		}
	}
	plot, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(plot), "<svg") || !strings.Contains(string(plot), "tiresias-l") {
		t.Errorf("plot: %v, %.100s", err, plot)
	}
}

// TestSimCommandCPUProfile checks that --cpuprofile writes a profile
// (gzipped protobuf) and that a file it cannot create is refused, naming
// the flag.
func TestSimCommandCPUProfile(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"sim", "--trace", sixtyJobs, "--cluster", "4x8",
		"--policy", "tiresias-l", "--cpuprofile", prof}, &out, &errOut); err != nil {
		t.Fatalf("sim: %v\n%s", err, errOut.String())
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("--cpuprofile wrote %d bytes, not a gzipped profile", len(b))
	}
	err = run(context.Background(), []string{"sim", "--trace", sixtyJobs, "--cluster", "4x8",
		"--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof")}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Errorf("profile in a missing folder: err %v, want one naming --cpuprofile", err)
	}
}

func TestSimCommandErrorsNameTheFlag(t *testing.T) {
	tests := []struct {
		args []string
		flag string
	}{
		{[]string{"sim", "--cluster", "4x8"}, "--trace"},
		{[]string{"sim", "--trace", sixtyJobs}, "--cluster"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--policy", "magic"}, "--policy"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--placement", "random"}, "--placement"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--preempt-cost-s", "-1"}, "--preempt-cost-s"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--pass-every-s", "-1"}, "--pass-every-s"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--pass-every-s", "NaN"}, "--pass-every-s"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--pass-every-s", "Inf"}, "--pass-every-s"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--format", "xml"}, "--format"},
		{[]string{"sim", "--trace", "/no/such/trace.csv", "--cluster", "4x8"}, "trace.csv"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--sharing", "mps"}, "--sharing"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--sharing", "salus", "--placement", "count"}, "--sharing"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--forecast", "--forecast-every", "0"}, "--forecast-every"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--forecast", "--forecast-oracle", "runtimes,future"}, "--forecast-oracle"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--forecast-oracle", "runtimes"}, "--forecast-oracle"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--forecast", "--forecast-max-load", "0"}, "--forecast-max-load"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--forecast", "--forecast-max-load", "-2"}, "--forecast-max-load"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--forecast", "--forecast-max-load", "NaN"}, "--forecast-max-load"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--forecast", "--forecast-max-load", "Inf"}, "--forecast-max-load"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--forecast", "--forecast-max-load", "two"}, "--forecast-max-load"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--forecast-max-load", "2"}, "--forecast-max-load"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--policy", "tiresias-l:magic"}, "--policy"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--policy", "fifo:queue-entry"}, "--policy"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--policy", "tiresias-l:queue-entry", "--reference"}, "--reference"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--days", "3"}, "--days"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--export", "x.csv"}, "--export"},
		{[]string{"sim", "--from-db", "--trace", sixtyJobs}, "--trace"},
		{[]string{"sim", "--from-db", "--days", "0"}, "--days"},
		{[]string{"sim", "--from-db", "--max-jobs", "-1"}, "--max-jobs"},
		{[]string{"sim", "--from-db", "--forecast"}, "--forecast"},
		{[]string{"sim", "--from-db", "--jitter-seed", "1"}, "--jitter-seed"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--jitter-seed", "-1"}, "jitter-seed"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--reserve-after-s", "-1"}, "--reserve-after-s"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--reserve-after-s", "NaN"}, "--reserve-after-s"},
		{[]string{"sim", "--trace", sixtyJobs, "--cluster", "4x8", "--max-reservations", "-2"}, "--max-reservations"},
	}
	for _, tc := range tests {
		var out, errOut bytes.Buffer
		err := run(context.Background(), tc.args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: err = %v, want it to name %s", tc.args[1:], err, tc.flag)
		}
	}
}

func TestSimCommandFairShare(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"sim", "--trace", "../core/sim/testdata/fairshare.csv", "--cluster", "4x8",
		"--policy", "tiresias-l", "--teams", "vision:16,nlp:16", "--json"}, &out, &errOut)
	if err != nil {
		t.Fatalf("sim: %v\n%s", err, errOut.String())
	}
	var rows []struct {
		Teams []struct {
			Team     string `json:"team"`
			Reclaims int    `json:"reclaims"`
		} `json:"teams"`
	}
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	reclaims := map[string]int{}
	for _, tm := range rows[0].Teams {
		reclaims[tm.Team] = tm.Reclaims
	}
	// The scenario of docs/simulator.md: nlp reclaims vision's two borrowed jobs.
	if len(reclaims) != 2 || reclaims["nlp"] != 2 || reclaims["vision"] != 0 {
		t.Errorf("reclaims per team = %v, want nlp 2, vision 0", reclaims)
	}
	if err := run(context.Background(), []string{"sim", "--trace", "../core/sim/testdata/fairshare.csv", "--cluster", "4x8", "--teams", "vision"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "--teams") {
		t.Errorf("bad --teams: err = %v, want it to name the flag", err)
	}
}

// TestSimCommandJitter replays jittered copies of a trace: the same seed
// gives the same figures, another seed other ones, and no seed the trace
// itself.
func TestSimCommandJitter(t *testing.T) {
	sim := func(extra ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"sim", "--trace", "../core/sim/testdata/fairshare.csv", "--cluster", "4x8", "--policy", "fifo", "--json"}, extra...)
		if err := run(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", args[1:], err, errOut.String())
		}
		var rows []struct {
			AvgJCT float64 `json:"avg_jct_s"`
		}
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("--json: %v\n%s", err, out.String())
		}
		return fmt.Sprint(rows[0].AvgJCT)
	}
	plain, one, two := sim(), sim("--jitter-seed", "1"), sim("--jitter-seed", "2")
	if again := sim("--jitter-seed", "1"); again != one {
		t.Errorf("seed 1 twice: avg JCT %s then %s", one, again)
	}
	if one == plain || two == plain || one == two {
		t.Errorf("avg JCT: trace %s, seed 1 %s, seed 2 %s: want three different figures", plain, one, two)
	}
	if zero := sim("--jitter-seed", "0"); zero != plain {
		t.Errorf("seed 0: avg JCT %s, want the trace's %s", zero, plain)
	}
}

// TestSimCommandSharing runs --sharing none and salus end to end on a
// tiny openb trace on one node of two 16 GB GPUs: two pods of 250
// thousandths of a GPU, 100 s each, at 0 and 2 s, and a whole-GPU pod of
// 50 s at 1 s. With salus the second small pod joins the first one's GPU
// (two lanes, each at full speed) and the whole pod takes the other;
// without, the second small pod waits for the whole one (docs/salus.md).
func TestSimCommandSharing(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "tiny-openb.csv")
	csv := "name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time\n" +
		"a,1,250,0,0,100\n" +
		"w,1,1000,1,1,51\n" +
		"b,1,250,2,2,102\n"
	if err := os.WriteFile(trace, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	type row struct {
		AvgJCT      float64 `json:"avg_jct_s"`
		Util        float64 `json:"gpu_utilization"`
		Sharing     string  `json:"sharing"`
		SharingJobs int     `json:"sharing_jobs"`
		CoLocations int     `json:"co_locations"`
	}
	want := map[string]row{
		"none":  {AvgJCT: (100 + 50 + 149) / 3.0, Util: 250.0 / 302},
		"salus": {AvgJCT: (100 + 50 + 100) / 3.0, Util: 152.0 / 204, Sharing: "salus", SharingJobs: 2, CoLocations: 1},
	}
	for mode, w := range want {
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"sim", "--trace", trace, "--format", "openb", "--cluster", "1x2x16",
			"--policy", "fjf", "--sharing", mode, "--json"}, &out, &errOut)
		if err != nil {
			t.Fatalf("--sharing %s: %v\n%s", mode, err, errOut.String())
		}
		var rows []row
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("--sharing %s --json: %v\n%s", mode, err, out.String())
		}
		got := rows[0]
		if math.Abs(got.AvgJCT-w.AvgJCT) > 1e-6 || math.Abs(got.Util-w.Util) > 1e-9 ||
			got.Sharing != w.Sharing || got.SharingJobs != w.SharingJobs || got.CoLocations != w.CoLocations {
			t.Errorf("--sharing %s: %+v, want %+v", mode, got, w)
		}
		out.Reset()
		err = run(context.Background(), []string{"sim", "--trace", trace, "--format", "openb", "--cluster", "1x2x16",
			"--policy", "fjf", "--sharing", mode}, &out, &errOut)
		if err != nil || strings.Contains(out.String(), "co-locations") != (mode == "salus") {
			t.Errorf("--sharing %s table: %v\n%s", mode, err, out.String())
		}
	}
}

// TestSimCommandForecast: --forecast replays the trace, forecasting each
// wait, and prints the calibration per policy (--json: the reports).
func TestSimCommandForecast(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"sim", "--trace", sixtyJobs, "--cluster", "2x4", "--policy", "fifo,tiresias-l", "--forecast"}, &out, &errOut)
	if err != nil {
		t.Fatalf("sim --forecast: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"within range", "median |err| s", "fifo", "tiresias-l", "arrivals"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := run(context.Background(), []string{"sim", "--trace", sixtyJobs, "--cluster", "2x4", "--policy", "fifo", "--forecast", "--json"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var reports []struct {
		Policy      string `json:"policy"`
		Calibration struct {
			Forecasts   int     `json:"forecasts"`
			WithinShare float64 `json:"within_share"`
		} `json:"calibration"`
	}
	if err := json.Unmarshal(out.Bytes(), &reports); err != nil || len(reports) != 1 || reports[0].Calibration.Forecasts == 0 {
		t.Errorf("--json: %+v, %v\n%s", reports, err, out.String())
	}
}

// TestSimCommandForecastMaxLoad: --forecast-max-load bounds the
// arrivals the forecasts expect. The 60-job trace submits 1.9 times what
// 2x4 GPUs serve, and its 8-GPU jobs wait for the last small one: at the
// default bound the forecasts let them in sooner than they start
// (docs/forecast.md, fourth and sixth rounds).
func TestSimCommandForecastMaxLoad(t *testing.T) {
	within := map[string]float64{}
	for _, ml := range []string{"1", "2"} {
		var out, errOut bytes.Buffer
		args := []string{"sim", "--trace", sixtyJobs, "--cluster", "2x4", "--policy", "tiresias-l", "--forecast", "--forecast-max-load", ml, "--json"}
		if err := run(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", args[1:], err, errOut.String())
		}
		var reports []struct {
			Calibration struct {
				Forecasts   int     `json:"forecasts"`
				WithinShare float64 `json:"within_share"`
			} `json:"calibration"`
		}
		if err := json.Unmarshal(out.Bytes(), &reports); err != nil || len(reports) != 1 || reports[0].Calibration.Forecasts != 20 {
			t.Fatalf("max load %s: %+v, %v; want 20 waits forecast", ml, reports, err)
		}
		within[ml] = reports[0].Calibration.WithinShare
	}
	if !(within["2"] > within["1"]) {
		t.Errorf("within the range: %.3f at max load 1, %.3f at 2; want more at 2 (0.75 and 0.90 measured)", within["1"], within["2"])
	}
}

// yarnPrior is a trace drawn from tiresias-g's prior (see its header).
const yarnPrior = "../core/sim/testdata/yarn-prior.csv"

// TestSimCommandRules compares a policy's rules side by side, as
// policy:rule, and under --reference.
func TestSimCommandRules(t *testing.T) {
	type row struct {
		Policy   string  `json:"policy"`
		Rule     string  `json:"rule"`
		Finished int     `json:"finished"`
		AvgJCT   float64 `json:"avg_jct_s"`
	}
	cases := []struct {
		args []string
		want []row // AvgJCT unchecked
	}{
		{[]string{"--policy", "tiresias-l,tiresias-l:queue-entry,tiresias-g:least-service,fjf"}, []row{
			{Policy: "tiresias-l", Rule: "preempted-first"}, {Policy: "tiresias-l:queue-entry", Rule: "queue-entry"},
			{Policy: "tiresias-g:least-service", Rule: "least-service"}, {Policy: "fjf"}}},
		{[]string{"--policy", "tiresias-l,tiresias-g,fjf", "--reference"}, []row{
			{Policy: "tiresias-l:reference", Rule: "reference"}, {Policy: "tiresias-g:reference", Rule: "reference"}, {Policy: "fjf"}}},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		args := append([]string{"sim", "--trace", yarnPrior, "--cluster", "4x8", "--placement", "count", "--json"}, c.args...)
		if err := run(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", c.args, err, errOut.String())
		}
		var rows []row
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
			t.Fatalf("--json output: %v\n%s", err, out.String())
		}
		if len(rows) != len(c.want) {
			t.Fatalf("%v: rows %+v", c.args, rows)
		}
		for i, r := range rows {
			if r.Policy != c.want[i].Policy || r.Rule != c.want[i].Rule || r.Finished != 1001 || !(r.AvgJCT > 0) {
				t.Errorf("%v: row %d = %+v, want %s (%s), all 1001 jobs finished", c.args, i, r, c.want[i].Policy, c.want[i].Rule)
			}
		}
	}
}

// TestSimCommandReservations: --reserve-after-s reaches the scheduler, and
// the output says how long the jobs of each size were pending.
func TestSimCommandReservations(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"sim", "--trace", "../testdata/traces/mixed-8gpu.csv", "--cluster", "1x8",
		"--policy", "tiresias-l", "--reserve-after-s", "900", "--json"}, &out, &errOut)
	if err != nil {
		t.Fatalf("sim: %v\n%s", err, errOut.String())
	}
	var rows []struct {
		ReserveAfterS float64 `json:"reserve_after_s"`
		Reserved      int     `json:"reserved_jobs"`
		Pending       []struct {
			GPUs int     `json:"gpus"`
			Max  float64 `json:"max_s"`
		} `json:"pending_by_gpus"`
	}
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out.String())
	}
	if len(rows) != 1 || rows[0].ReserveAfterS != 900 || rows[0].Reserved == 0 || len(rows[0].Pending) != 2 ||
		rows[0].Pending[1].GPUs != 8 || rows[0].Pending[1].Max > 1800 {
		t.Fatalf("rows = %+v", rows)
	}
}
