package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The files under deploy/ that this test proves.
var (
	dashboardFile  = filepath.Join("..", "deploy", "grafana", "gpuportal.json")
	alertsFile     = filepath.Join("..", "deploy", "prometheus", "alerts.yml")
	alertTestsFile = filepath.Join("..", "deploy", "prometheus", "alerts_test.yml")
)

// prometheusTools returns the paths of prometheus and promtool, or
// skips (fails in CI).
func prometheusTools(t *testing.T) (prom, promtool string) {
	t.Helper()
	prom, err1 := exec.LookPath("prometheus")
	promtool, err2 := exec.LookPath("promtool")
	if err1 == nil && err2 == nil {
		return prom, promtool
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no prometheus and promtool: the metrics tests need them in CI (scripts/ensure-prometheus)")
	}
	t.Skip("prometheus and promtool are not installed (scripts/ensure-prometheus)")
	return "", ""
}

// TestPrometheusDashboardAndAlerts runs a real Prometheus, as its own
// process, scraping the real server once a second (serve --dev --demo,
// with one remote agent so that heartbeats are measured), then runs
// every query of the Grafana dashboard, with its variables resolved as
// Grafana resolves them, and requires data from each; loads the alert
// rules into that Prometheus and requires each to evaluate without
// error, and each series it reads to exist. promtool checks the rules,
// runs their unit tests and lints the server's /metrics.
func TestPrometheusDashboardAndAlerts(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	prom, promtool := prometheusTools(t)
	promtoolOK(t, promtool, "", "check", "rules", alertsFile)
	promtoolOK(t, promtool, "", "test", "rules", alertTestsFile)

	// /metrics behind its token, as docs/operations.md has it: then it
	// names the users and jobs the dashboard's job panels select by.
	tokenFile := filepath.Join(t.TempDir(), "metrics-token")
	const token = "prometheus-test-token-0123456789"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--demo", "--agent-token", agentToken, "--data", t.TempDir(), "--metrics-token-file", tokenFile)
	startAgent(t, srv.URL, "remote-0")
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without its token: %d; want 401", resp.StatusCode)
	}
	p := startPrometheus(t, prom, strings.TrimPrefix(srv.URL, "http://"), tokenFile)
	began := time.Now()

	// Evaluate once there is data: a few scrapes, the remote agent's
	// heartbeats, the demo's first starts, every rule evaluated.
	eventually(t, 30*time.Second, "Prometheus to hold the data the dashboard shows", func() bool {
		ok := true
		for _, q := range []string{
			`count_over_time(up{job="gpuportal"}[1m]) >= 5`,
			`gpuportal_agent_heartbeat_age_seconds{node="remote-0"}`,
			`gpuportal_job_queue_wait_seconds_count`,
			`gpuportal_job_gpu_memory_used_bytes`,
		} {
			res, err := p.instant(q, time.Now())
			ok = ok && err == nil && len(res) > 0
		}
		return ok && p.rulesEvaluated(t)
	})
	end := time.Now()
	start := began.Add(-time.Second)

	// promtool's lint of the server's own /metrics, with every family
	// present (GPU readings, histograms, the remote agent).
	promtoolOK(t, promtool, metricsTextWith(t, srv.URL, token), "check", "metrics")

	t.Run("dashboard", func(t *testing.T) {
		d := readDashboard(t)
		vars := p.resolveVariables(t, d, start, end)
		for _, want := range []struct{ name, value string }{{"node", "remote-0"}, {"node", "node-0"}, {"team", "vision"}, {"team", "nlp"}} {
			if !strings.Contains(vars["$"+want.name], want.value) {
				t.Errorf("variable %s = %q: lacks %s", want.name, vars["$"+want.name], want.value)
			}
		}
		queries := 0
		for _, pn := range d.allPanels() {
			for _, tg := range pn.Targets {
				queries++
				expr := substitute(tg.Expr, vars)
				if strings.Contains(expr, "$") {
					t.Errorf("panel %q, query %s: a variable the dashboard does not define: %s", pn.Title, tg.RefID, expr)
					continue
				}
				var n int
				var err error
				if tg.Instant {
					var res []promSeries
					res, err = p.instant(expr, end)
					n = len(res)
				} else {
					var res []promSeries
					res, err = p.rangeQuery(expr, start, end)
					for _, s := range res {
						n += len(s.Values)
					}
				}
				switch {
				case err != nil:
					t.Errorf("panel %q, query %s: %v\n%s", pn.Title, tg.RefID, err, expr)
				case n == 0:
					t.Errorf("panel %q, query %s: no data\n%s", pn.Title, tg.RefID, expr)
				}
			}
		}
		if queries < 20 {
			t.Errorf("the dashboard has %d queries; want the cluster's, the teams' and a job's", queries)
		}
		t.Logf("%d dashboard queries run (job %s, over %s)", queries, vars["$job_id"], end.Sub(start).Round(time.Second))
	})

	t.Run("alerts", func(t *testing.T) {
		src, err := os.ReadFile(alertsFile)
		if err != nil {
			t.Fatal(err)
		}
		rules := p.rules(t)
		if want := strings.Count(string(src), "- alert:"); len(rules) != want {
			t.Errorf("Prometheus loaded %d rules of the %d in %s", len(rules), want, alertsFile)
		}
		selector := regexp.MustCompile(`\b(gpuportal_[a-z0-9_]+|up)(\{[^}]*\})?`)
		for _, r := range rules {
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("alert %s: health %q, error %q", r.Name, r.Health, r.LastError)
			}
			sels := selector.FindAllString(r.Query, -1)
			if len(sels) == 0 {
				t.Errorf("alert %s reads no gpuportal series: %s", r.Name, r.Query)
			}
			for _, sel := range sels {
				res, err := p.rangeQuery(sel, start, end)
				if err != nil || len(res) == 0 {
					t.Errorf("alert %s: %s has no data (%v)", r.Name, sel, err)
				}
			}
		}
	})
}

// promtoolOK runs promtool with args (and stdin, where not empty) and
// fails unless it succeeds and, for a lint, finds nothing.
func promtoolOK(t *testing.T, promtool, stdin string, args ...string) {
	t.Helper()
	cmd := exec.Command(promtool, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if args[0] == "check" && args[1] == "metrics" && len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics finds problems in /metrics:\n%s", out)
	}
}

// prometheusServer is a Prometheus the test started.
type prometheusServer struct {
	URL string
}

// startPrometheus runs prom on a free port with a configuration of its
// own that scrapes target every second, with the bearer token in
// tokenFile, and evaluates the alert rules every second, in a temporary
// folder, until t ends.
func startPrometheus(t *testing.T, prom, target, tokenFile string) *prometheusServer {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: gpuportal
    authorization:
      credentials_file: %q
    static_configs:
      - targets: [%q]
`, rules, tokenFile, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("prometheus output:\n%s", b)
		}
	})
	p := &prometheusServer{URL: "http://" + addr}
	eventually(t, 20*time.Second, "Prometheus to be ready", func() bool {
		resp, err := http.Get(p.URL + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// promSeries is one series of a query's result: a value for an instant
// query, values for a range query.
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// get calls Prometheus's HTTP API and decodes its data into out.
func (p *prometheusServer) get(path string, q url.Values, out any) error {
	resp, err := http.Get(p.URL + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status    string          `json:"status"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
		Warnings  []string        `json:"warnings"`
		ErrorType string          `json:"errorType"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: status %d: %s", path, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	if len(r.Warnings) > 0 {
		return fmt.Errorf("%s: warnings %v", path, r.Warnings)
	}
	return json.Unmarshal(r.Data, out)
}

func unixTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

func (p *prometheusServer) instant(expr string, at time.Time) ([]promSeries, error) {
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {expr}, "time": {unixTime(at)}}, &d); err != nil {
		return nil, err
	}
	if d.ResultType == "scalar" {
		return []promSeries{{}}, nil
	}
	var out []promSeries
	return out, json.Unmarshal(d.Result, &out)
}

// rangeQuery runs expr from start to end a second apart, as a Grafana
// time series panel does.
func (p *prometheusServer) rangeQuery(expr string, start, end time.Time) ([]promSeries, error) {
	var d struct {
		Result []promSeries `json:"result"`
	}
	err := p.get("/api/v1/query_range", url.Values{"query": {expr}, "start": {unixTime(start)},
		"end": {unixTime(end)}, "step": {"1"}}, &d)
	return d.Result, err
}

// promRule is an alert rule as Prometheus evaluates it.
type promRule struct {
	Name           string `json:"name"`
	Query          string `json:"query"`
	Health         string `json:"health"`
	LastError      string `json:"lastError"`
	LastEvaluation string `json:"lastEvaluation"`
}

func (p *prometheusServer) rules(t *testing.T) []promRule {
	t.Helper()
	var d struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", url.Values{"type": {"alert"}}, &d); err != nil {
		t.Fatal(err)
	}
	var out []promRule
	for _, g := range d.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// rulesEvaluated reports whether every rule was evaluated at least once.
func (p *prometheusServer) rulesEvaluated(t *testing.T) bool {
	rs := p.rules(t)
	for _, r := range rs {
		if r.Health == "unknown" || strings.HasPrefix(r.LastEvaluation, "0001-") {
			return false
		}
	}
	return len(rs) > 0
}

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	Templating struct {
		List []dashVariable `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

type dashVariable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Definition string `json:"definition"`
	Multi      bool   `json:"multi"`
	IncludeAll bool   `json:"includeAll"`
}

type dashPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID   string `json:"refId"`
		Expr    string `json:"expr"`
		Instant bool   `json:"instant"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"` // of a collapsed row
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels lists the panels with queries, those of collapsed rows too.
func (d dashboard) allPanels() []dashPanel {
	var out []dashPanel
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			if len(p.Targets) > 0 {
				out = append(out, p)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// resolveVariables gives each variable of d its value as Grafana would
// from Prometheus between start and end: label_values(metric, label)
// through the label values API; a multi-value variable takes all its
// values, as the regex (a|b) Grafana sends; a single one its oldest
// value (for a job: the one that ran longest). $__rate_interval is what
// Grafana computes for a 1 s scrape interval: 4 s.
func (p *prometheusServer) resolveVariables(t *testing.T, d dashboard, start, end time.Time) map[string]string {
	t.Helper()
	vars := map[string]string{"$__rate_interval": "4s"}
	labelValues := regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(metric, label)", v.Name, v.Definition)
		}
		var values []string
		err := p.get("/api/v1/label/"+m[2]+"/values", url.Values{"match[]": {m[1]}, "start": {unixTime(start)},
			"end": {unixTime(end)}}, &values)
		if err != nil || len(values) == 0 {
			t.Fatalf("variable %s (%s): no values (%v)", v.Name, v.Definition, err)
		}
		if v.Multi || v.IncludeAll {
			for i := range values {
				values[i] = regexp.QuoteMeta(values[i])
			}
			vars["$"+v.Name] = "(" + strings.Join(values, "|") + ")"
			continue
		}
		sort.Slice(values, func(a, b int) bool {
			x, errx := strconv.Atoi(values[a])
			y, erry := strconv.Atoi(values[b])
			if errx == nil && erry == nil {
				return x < y
			}
			return values[a] < values[b]
		})
		vars["$"+v.Name] = values[0]
	}
	return vars
}

// substitute puts the variables' values into expr, longest names first
// (so that $job_id is not read as $job).
func substitute(expr string, vars map[string]string) string {
	names := make([]string, 0, len(vars))
	for n := range vars {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	for _, n := range names {
		expr = strings.ReplaceAll(expr, n, vars[n])
	}
	return expr
}
