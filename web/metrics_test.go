package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// metricsNode is a machine of four GPUs whose readings name no job, as
// under the Slurm executor: only the placement says who holds a GPU.
type metricsNode struct{ runs []job.RunRef }

func (n *metricsNode) Name() string { return "g0" }
func (n *metricsNode) Devices() []gpu.Device {
	var out []gpu.Device
	for i := range 4 {
		out = append(out, gpu.Device{Index: i, UUID: fmt.Sprintf("GPU-g0-%d", i), Model: "A100", MemMiB: 40960})
	}
	return out
}
func (n *metricsNode) Resources() (int, int64) { return 0, 0 }
func (n *metricsNode) Start(context.Context, job.Spec) error {
	return fmt.Errorf("this node runs nothing")
}
func (n *metricsNode) Stop(context.Context, job.RunRef) error { return nil }
func (n *metricsNode) Running() []job.RunRef                  { return n.runs }
func (n *metricsNode) Sample(now time.Time) []gpu.Sample {
	util := []float64{100, 50, 80, 0}
	var out []gpu.Sample
	for i, u := range util {
		out = append(out, gpu.Sample{At: now, Index: i, MemMiB: 40960, MemUsedMiB: int64(1000 * i), UtilPct: u,
			TempC: 40 + i, PowerW: 100 + float64(i), LastXID: 0})
	}
	return out
}

// scrape parses /metrics, asked for with the bearer token, if any.
func scrape(t *testing.T, ts *testServer, token ...string) map[string]*dto.MetricFamily {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	for _, tok := range token {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	rec := httptest.NewRecorder()
	ts.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: status %d: %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value is the value of the series of family name whose labels include
// want; ok is false unless exactly one matches.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var v float64
	n := 0
	for _, m := range f.Metric {
		labels := make(map[string]string)
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, w := range want {
			if labels[k] != w {
				match = false
			}
		}
		if !match {
			continue
		}
		n++
		switch {
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Histogram != nil:
			v = float64(m.Histogram.GetSampleCount())
		}
	}
	return v, n == 1
}

// metricsCluster adds metricsNode to ts's engine with jobs placed on it:
// a 2-GPU job of alice's on GPUs 0 and 1 (whole), and GPU 2 shared by
// alice (a) and bob (b).
func metricsCluster(t *testing.T, ts *testServer) (whole, a, b int64) {
	t.Helper()
	ctx := context.Background()
	node := &metricsNode{}
	start := func(user, team string, gpus []string, sharing bool) int64 {
		j := &models.Job{Name: "m", Team: team, User: user, GPUs: len(gpus), Command: []string{"true"},
			SubmittedAt: time.Now(), Sharing: sharing}
		if err := ts.store.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		run, err := ts.store.MarkStarted(ctx, j.ID, gpus, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		node.runs = append(node.runs, job.RunRef{Job: j.ID, Run: run})
		return j.ID
	}
	whole = start("alice", "vision", []string{"g0:0", "g0:1"}, false)
	a = start("alice", "vision", []string{"g0:2"}, true)
	b = start("bob", "nlp", []string{"g0:2"}, true)
	if err := ts.engine.AddNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	return whole, a, b
}

// TestMetricsGPUs: every GPU's readings carry its node, index, UUID and
// the jobs, users and teams placed on it (where the operator lets
// /metrics name them); a GPU is busy when a job is placed on it,
// whatever its memory says; a team's allocated GPUs are the teams API's,
// its utilized GPUs its shares times utilization.
func TestMetricsGPUs(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *testConfig) { c.MetricsUserLabels = true })
	whole, a, b := metricsCluster(t, ts)
	fams := scrape(t, ts)

	for _, tc := range []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"a 2-GPU job's GPUs are busy though no memory names it", "gpuportal_gpus", map[string]string{"state": "busy"}, 3},
		{"the free GPU is idle", "gpuportal_gpus", map[string]string{"state": "idle"}, 1},
		{"none out of service", "gpuportal_gpus", map[string]string{"state": "unavailable"}, 0},
		{"a whole GPU names its job, user and team", "gpuportal_gpu_utilization_percent",
			map[string]string{"node": "g0", "gpu": "0", "uuid": "GPU-g0-0", "job_id": itoa(whole), "user": "alice", "team": "vision"}, 100},
		{"a shared GPU names its jobs in order", "gpuportal_gpu_utilization_percent",
			map[string]string{"gpu": "2", "job_id": itoa(a) + "," + itoa(b), "user": "alice,bob", "team": "vision,nlp"}, 80},
		{"a free GPU has empty labels", "gpuportal_gpu_temperature_celsius",
			map[string]string{"gpu": "3", "job_id": "", "user": "", "team": ""}, 43},
		{"memory in bytes", "gpuportal_gpu_memory_used_bytes", map[string]string{"gpu": "1"}, 1000 << 20},
		{"memory total in bytes", "gpuportal_gpu_memory_total_bytes", map[string]string{"gpu": "1"}, 40960 << 20},
		{"power", "gpuportal_gpu_power_usage_watts", map[string]string{"gpu": "1"}, 101},
		{"ECC errors", "gpuportal_gpu_ecc_uncorrected_errors_total", map[string]string{"gpu": "1"}, 0},
		{"XID errors", "gpuportal_gpu_xid_errors_total", map[string]string{"gpu": "1"}, 0},
		{"the last XID", "gpuportal_gpu_last_xid", map[string]string{"gpu": "1"}, 0},
		{"the model", "gpuportal_gpu_info", map[string]string{"gpu": "3", "model": "A100"}, 1},
		{"a shared GPU is allocated once", "gpuportal_gpu_allocated", map[string]string{"gpu": "2"}, 1},
		{"a free GPU is not allocated", "gpuportal_gpu_allocated", map[string]string{"gpu": "3"}, 0},
		{"each sharing job holds half", "gpuportal_job_gpu_share", map[string]string{"job_id": itoa(b), "user": "bob", "team": "nlp", "gpu": "2"}, 0.5},
		{"vision keeps 1 + 0.5 + 0.5 x 0.8 GPUs busy", "gpuportal_team_gpus_utilized", map[string]string{"team": "vision"}, 1.9},
		{"nlp keeps 0.5 x 0.8 busy", "gpuportal_team_gpus_utilized", map[string]string{"team": "nlp"}, 0.4},
		{"the cluster keeps 2.3 busy", "gpuportal_gpus_utilized", nil, 2.3},
		{"3 GPUs allocated", "gpuportal_gpus_in_use", nil, 3},
	} {
		got, ok := value(fams, tc.metric, tc.labels)
		if !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %s%v = %v (one series: %v), want %v", tc.name, tc.metric, tc.labels, got, ok, tc.want)
		}
	}

	// Allocated GPUs per team: the teams API's figures.
	var teams []api.TeamShare
	if err := json.Unmarshal(ts.do(t, "admin", http.MethodGet, "/api/v1/teams", "").Body.Bytes(), &teams); err != nil {
		t.Fatal(err)
	}
	for _, tm := range teams {
		got, ok := value(fams, "gpuportal_team_gpus_in_use", map[string]string{"team": tm.Name})
		if !ok || got != tm.InUseGPUs {
			t.Errorf("team %s: /metrics allocates %v GPUs, the API %v", tm.Name, got, tm.InUseGPUs)
		}
		if u, _ := value(fams, "gpuportal_team_gpus_utilized", map[string]string{"team": tm.Name}); u > tm.InUseGPUs+1e-9 {
			t.Errorf("team %s utilizes %v of the %v GPUs it holds", tm.Name, u, tm.InUseGPUs)
		}
	}
	if got, want := len(fams["gpuportal_gpu_utilization_percent"].GetMetric()), 4; got != want {
		t.Errorf("%d utilization series, want one per GPU (%d)", got, want)
	}
}

// bigNode is a machine of 8 simulated readings for the scrape benchmark.
type bigNode struct {
	metricsNode
	name string
}

func (n *bigNode) Name() string { return n.name }
func (n *bigNode) Devices() []gpu.Device {
	var out []gpu.Device
	for i := range 8 {
		out = append(out, gpu.Device{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", n.name, i), Model: "H100", MemMiB: 81920})
	}
	return out
}
func (n *bigNode) Sample(now time.Time) []gpu.Sample {
	var out []gpu.Sample
	for i := range 8 {
		out = append(out, gpu.Sample{At: now, Index: i, MemMiB: 81920, MemUsedMiB: 40000, UtilPct: 75, TempC: 60, PowerW: 400})
	}
	return out
}

// BenchmarkMetricsScrape scrapes a cluster of 64 machines of 8 GPUs,
// each GPU held by a running job: the cost of one /metrics.
func BenchmarkMetricsScrape(b *testing.B) {
	ts := newTestServer(b)
	ctx := context.Background()
	for m := range 64 {
		node := &bigNode{name: fmt.Sprintf("m%02d", m)}
		for g := range 8 {
			j := &models.Job{Name: "b", Team: []string{"vision", "nlp"}[g%2], User: "alice", GPUs: 1,
				Command: []string{"true"}, SubmittedAt: time.Now()}
			if err := ts.store.CreateJob(ctx, j); err != nil {
				b.Fatal(err)
			}
			run, err := ts.store.MarkStarted(ctx, j.ID, []string{fmt.Sprintf("%s:%d", node.name, g)}, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			node.runs = append(node.runs, job.RunRef{Job: j.ID, Run: run})
		}
		if err := ts.engine.AddNode(ctx, node); err != nil {
			b.Fatal(err)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ResetTimer()
	for range b.N {
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
		b.SetBytes(int64(rec.Body.Len()))
	}
}

// TestMetricsToken: /metrics is anonymous and names no user or job
// unless the operator says so; behind its token it names them, and
// refuses requests without the token, or with another, with 401.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	const token = "metrics-t0ken"
	for _, tc := range []struct {
		name  string
		cfg   func(*testConfig)
		token string
		names bool
	}{
		{"anonymous: no names", func(*testConfig) {}, "", false},
		{"anonymous with --metrics-user-labels", func(c *testConfig) { c.MetricsUserLabels = true }, "", true},
		{"behind a token", func(c *testConfig) { c.MetricsToken = token }, token, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, tc.cfg)
			whole, _, b := metricsCluster(t, ts)
			var fams map[string]*dto.MetricFamily
			if tc.token == "" {
				fams = scrape(t, ts)
			} else {
				fams = scrape(t, ts, tc.token)
			}
			named := map[string]string{"gpu": "0", "job_id": itoa(whole), "user": "alice", "team": "vision"}
			anonymous := map[string]string{"gpu": "0", "job_id": "", "user": "", "team": "vision"}
			want, not := anonymous, named
			if tc.names {
				want, not = named, anonymous
			}
			if _, ok := value(fams, "gpuportal_gpu_utilization_percent", want); !ok {
				t.Errorf("no GPU series labelled %v", want)
			}
			if _, ok := value(fams, "gpuportal_gpu_utilization_percent", not); ok {
				t.Errorf("a GPU series labelled %v", not)
			}
			if _, ok := value(fams, "gpuportal_job_gpu_share", map[string]string{"job_id": itoa(b)}); ok != tc.names {
				t.Errorf("per-job series present: %v; want %v", ok, tc.names)
			}
			// The teams' figures are there either way.
			if v, ok := value(fams, "gpuportal_team_gpus_in_use", map[string]string{"team": "vision"}); !ok || v != 2.5 {
				t.Errorf("vision's GPUs in use: %v (%v)", v, ok)
			}
			// The shares sum by team either way (issue 36: joined labels
			// such as team="vision,nlp" broke sum by (team)): per job, or
			// per team and GPU without names.
			byTeam := map[string]float64{}
			for _, m := range fams["gpuportal_job_gpu_share"].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "team" {
						byTeam[l.GetValue()] += m.GetGauge().GetValue()
					}
				}
			}
			if byTeam["vision"] != 2.5 || byTeam["nlp"] != 0.5 || len(byTeam) != 2 {
				t.Errorf("sum by (team) (gpuportal_job_gpu_share) = %v, want vision 2.5, nlp 0.5", byTeam)
			}
			if tc.token == "" {
				return
			}
			for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Basic " + token, "bearer " + token, "Bearer " + token + "x"} {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				rec := httptest.NewRecorder()
				ts.Handler().ServeHTTP(rec, req)
				if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" || strings.Contains(rec.Body.String(), "alice") {
					t.Errorf("Authorization %q: status %d; want 401 asking for a bearer token", auth, rec.Code)
				}
			}
		})
	}
}
