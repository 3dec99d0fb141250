package integration

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models/modelstest"
)

// BenchmarkClusterAtScale measures what issue 23 set out: with 1,024
// simulated GPUs (128 machines of 8 in the built-in agent) and a long
// queue of jobs of 20-60 s (1, 2, 4 or 8 GPUs at 60/15/15/10%), how many
// GPUs sit idle while jobs wait, and how late job ends are recorded. It
// queues GPUPORTAL_SCALE_QUEUE jobs (default 10,000), then reads /metrics
// every second for GPUPORTAL_SCALE_SECONDS (default 120), topping the
// queue up to its length as jobs end; on SQLite, or on PostgreSQL with
// GPUPORTAL_SCALE_DB=postgres. It reports:
//
//   - idle_pct: the mean share of GPUs idle, over the samples;
//   - idle_p95_pct: the 95th percentile of that share;
//   - exit_lag_p50_ms, exit_lag_p99_ms: from a run's end on its machine
//     to the store's record (gpuportal_engine_exit_lag_seconds, the
//     bucket's upper bound), and exit_lag_within_1s_pct;
//   - pass_ms, pass_p99_ms: the whole engine pass, mean and 99th
//     percentile (the bucket's bound), and each phase's mean (load_ms,
//     schedule_ms, apply_ms, record_ms);
//   - ends/s: the jobs that ended per second.
//
// Run by hand (a long benchmark, not part of the test command):
//
//	go test -run '^$' -bench ClusterAtScale -benchtime 1x -timeout 30m ./integration
func BenchmarkClusterAtScale(b *testing.B) {
	queue, secs := envInt(b, "GPUPORTAL_SCALE_QUEUE", 10000), envInt(b, "GPUPORTAL_SCALE_SECONDS", 120)
	for range b.N {
		args := []string{"--data", b.TempDir(), "--sim-gpus", "128x8x80", "--log-level", "warn"}
		if os.Getenv("GPUPORTAL_SCALE_DB") == "postgres" {
			args = append(args, "--db", modelstest.PostgresDSN(b))
		}
		srv := startServer(b, args...)
		token := benchToken(b, srv.URL, "alice", "dev")
		rng := rand.New(rand.NewPCG(23, 1024))
		var mu sync.Mutex
		next := 0
		submit := func() error {
			mu.Lock()
			next++
			n, gpus, dur := next, 8, 20+rng.IntN(41)
			switch u := rng.Float64(); {
			case u < 0.6:
				gpus = 1
			case u < 0.75:
				gpus = 2
			case u < 0.9:
				gpus = 4
			}
			mu.Unlock()
			return benchSubmit(srv.URL, token, fmt.Sprint("scale-", n), gpus, dur)
		}
		fill := func(want int) { inParallel(b, 8, want, submit) }
		began := time.Now()
		fill(queue)
		b.Logf("queued %d jobs in %s", queue, time.Since(began).Round(time.Second))
		first := scrape(b, srv.URL)
		var idle []float64
		for s := range secs {
			time.Sleep(time.Second) // about time: the benchmark samples the cluster once a second
			m := scrape(b, srv.URL)
			busy, free := m.get(`gpuportal_gpus{state="busy"}`), m.get(`gpuportal_gpus{state="idle"}`)
			if busy+free > 0 {
				idle = append(idle, 100*free/(busy+free))
			}
			// Keep the queue at its length: as many new jobs as ended.
			waiting := m.sumPrefix(`gpuportal_queue_jobs{`, `status="waiting"`)
			if add := queue - int(waiting); add > 0 && s < secs-1 {
				fill(add)
			}
		}
		last := scrape(b, srv.URL)
		ended := last.sumPrefix(`gpuportal_jobs{`, `state="succeeded"`) - first.sumPrefix(`gpuportal_jobs{`, `state="succeeded"`)
		slices.Sort(idle)
		mean := 0.0
		for _, v := range idle {
			mean += v / float64(len(idle))
		}
		b.ReportMetric(mean, "idle_pct")
		b.ReportMetric(idle[min(len(idle)-1, int(0.95*float64(len(idle))))], "idle_p95_pct")
		b.ReportMetric(last.quantile(first, "gpuportal_engine_exit_lag_seconds", 0.5)*1000, "exit_lag_p50_ms")
		b.ReportMetric(last.quantile(first, "gpuportal_engine_exit_lag_seconds", 0.99)*1000, "exit_lag_p99_ms")
		b.ReportMetric(100*last.below(first, "gpuportal_engine_exit_lag_seconds", 1), "exit_lag_within_1s_pct")
		passes := last.get("gpuportal_engine_pass_duration_seconds_count") - first.get("gpuportal_engine_pass_duration_seconds_count")
		if passes > 0 {
			b.ReportMetric((last.get("gpuportal_engine_pass_duration_seconds_sum")-first.get("gpuportal_engine_pass_duration_seconds_sum"))/passes*1000, "pass_ms")
			b.ReportMetric(last.quantile(first, "gpuportal_engine_pass_duration_seconds", 0.99)*1000, "pass_p99_ms")
			for _, ph := range []string{"load", "schedule", "apply", "record"} {
				k := fmt.Sprintf("gpuportal_engine_pass_phase_seconds_total{phase=%q}", ph)
				b.ReportMetric((last.get(k)-first.get(k))/passes*1000, ph+"_ms")
			}
		}
		b.ReportMetric(ended/float64(secs), "ends/s")
	}
}

// BenchmarkClusterFill measures how fast a burst is placed, the shape of
// KAI scheduler's scale test: GPUPORTAL_FILL_JOBS one-GPU jobs of an hour
// (default 4,000), submitted at once by 8 clients, onto
// GPUPORTAL_FILL_NODES simulated machines of 8 GPUs (default 500). It
// reports submit_s (until the last submission is acknowledged), fill_s
// (from the first submission until every job runs, by /metrics' busy
// GPUs read every 100 ms) and placed/s.
//
//	go test -run '^$' -bench ClusterFill -benchtime 1x -timeout 30m ./integration
func BenchmarkClusterFill(b *testing.B) {
	jobs, nodes := envInt(b, "GPUPORTAL_FILL_JOBS", 4000), envInt(b, "GPUPORTAL_FILL_NODES", 500)
	for range b.N {
		srv := startServer(b, "--data", b.TempDir(), "--sim-gpus", fmt.Sprintf("%dx8x80", nodes), "--log-level", "warn")
		token := benchToken(b, srv.URL, "alice", "dev")
		var mu sync.Mutex
		next := 0
		began := time.Now()
		inParallel(b, 8, jobs, func() error {
			mu.Lock()
			next++
			n := next
			mu.Unlock()
			return benchSubmit(srv.URL, token, fmt.Sprint("fill-", n), 1, 3600)
		})
		submitted := time.Since(began)
		want := float64(min(jobs, 8*nodes))
		for scrape(b, srv.URL).get(`gpuportal_gpus{state="busy"}`) < want {
			if time.Since(began) > 20*time.Minute {
				b.Fatalf("%v of %v jobs run after 20 minutes", scrape(b, srv.URL).get(`gpuportal_gpus{state="busy"}`), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
		filled := time.Since(began)
		b.ReportMetric(submitted.Seconds(), "submit_s")
		b.ReportMetric(filled.Seconds(), "fill_s")
		b.ReportMetric(want/filled.Seconds(), "placed/s")
	}
}

// BenchmarkManyTeams measures admissions from many queues, the shape of
// Kueue's scale test: GPUPORTAL_TEAMS teams (default 30), each with a
// user and a guarantee of its share of the 1,024 simulated GPUs, queue
// GPUPORTAL_TEAMS_JOBS one-GPU jobs of 1 s between them (default 15,000)
// while every machine is cordoned; then every machine is uncordoned at
// once. It reports admitted/s: the jobs started a second from then until
// the last has started (gpuportal_job_starts_total), and done_s, until
// every job has succeeded.
//
//	go test -run '^$' -bench ManyTeams -benchtime 1x -timeout 30m ./integration
func BenchmarkManyTeams(b *testing.B) {
	teams, jobs := envInt(b, "GPUPORTAL_TEAMS", 30), envInt(b, "GPUPORTAL_TEAMS_JOBS", 15000)
	const nodes, perNode = 128, 8
	for range b.N {
		data := b.TempDir()
		tokens := make([]string, teams)
		for i := range teams {
			team, user := fmt.Sprint("q", i), fmt.Sprint("u", i)
			for _, args := range [][]string{
				{"create-team", "--name", team, "--guarantee", strconv.Itoa(nodes * perNode / teams)},
				{"create-user", "--name", user, "--role", "researcher", "--team", team, "--password-stdin"},
			} {
				cmd := exec.Command(binary, append([]string{"admin", "--data", data}, args...)...)
				cmd.Stdin = strings.NewReader("scale-pass\n")
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("admin %s: %v\n%s", args[0], err, out)
				}
			}
		}
		srv := startServer(b, "--data", data, "--sim-gpus", fmt.Sprintf("%dx%dx80", nodes, perNode), "--log-level", "warn")
		for i := range teams {
			tokens[i] = benchToken(b, srv.URL, fmt.Sprint("u", i), "scale-pass")
		}
		admin := benchToken(b, srv.URL, "admin", "dev")
		node := func(action string) func() error {
			var mu sync.Mutex
			next := 0
			return func() error {
				mu.Lock()
				n := next
				next++
				mu.Unlock()
				return benchPost(srv.URL+fmt.Sprintf("/api/v1/nodes/node-%d/%s", n, action), admin, http.StatusOK)
			}
		}
		inParallel(b, 8, nodes, node("cordon"))
		var mu sync.Mutex
		next := 0
		inParallel(b, 8, jobs, func() error {
			mu.Lock()
			n := next
			next++
			mu.Unlock()
			return benchSubmit(srv.URL, tokens[n%teams], fmt.Sprint("t-", n), 1, 1)
		})
		before := scrape(b, srv.URL).get("gpuportal_job_starts_total")
		began := time.Now()
		inParallel(b, 8, nodes, node("uncordon"))
		var admitted time.Duration
		for {
			m := scrape(b, srv.URL)
			if admitted == 0 && m.get("gpuportal_job_starts_total")-before >= float64(jobs) {
				admitted = time.Since(began)
			}
			if m.sumPrefix(`gpuportal_jobs{`, `state="succeeded"`) >= float64(jobs) {
				break
			}
			if time.Since(began) > 20*time.Minute {
				b.Fatalf("%v of %d jobs succeeded after 20 minutes", m.sumPrefix(`gpuportal_jobs{`, `state="succeeded"`), jobs)
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.ReportMetric(float64(jobs)/admitted.Seconds(), "admitted/s")
		b.ReportMetric(time.Since(began).Seconds(), "done_s")
	}
}

// benchPost posts to url with token and wants status.
func benchPost(url, token string, status int) error {
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != status {
		return fmt.Errorf("POST %s: status %d, want %d", url, resp.StatusCode, status)
	}
	return nil
}

// benchSubmit submits one simulated job of gpus GPUs and dur seconds.
func benchSubmit(base, token, name string, gpus, dur int) error {
	body, _ := json.Marshal(map[string]any{"name": name, "gpus": gpus, "sim": map[string]any{"duration_s": dur}})
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/jobs", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("submit %s: status %d", name, resp.StatusCode)
	}
	return nil
}

// inParallel runs f n times on workers goroutines.
func inParallel(tb testing.TB, workers, n int, f func() error) {
	var wg sync.WaitGroup
	work := make(chan struct{})
	for range workers {
		wg.Go(func() {
			for range work {
				if err := f(); err != nil {
					tb.Error(err)
				}
			}
		})
	}
	for range n {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
}

// benchToken gets an API token for user.
func benchToken(tb testing.TB, base, user, password string) string {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/tokens", nil)
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Token == "" {
		tb.Fatalf("token: status %d, %v", resp.StatusCode, err)
	}
	return out.Token
}

// metrics are the samples of one scrape of /metrics, by series.
type metrics map[string]float64

func scrape(tb testing.TB, base string) metrics {
	tb.Helper()
	text := metricsText(tb, base)
	if text == "" {
		tb.Fatalf("%s/metrics: no answer", base)
	}
	m := metrics{}
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}

func (m metrics) get(series string) float64 { return m[series] }

// sumPrefix sums the series that start with prefix and hold label.
func (m metrics) sumPrefix(prefix, label string) float64 {
	sum := 0.0
	for k, v := range m {
		if strings.HasPrefix(k, prefix) && strings.Contains(k, label) {
			sum += v
		}
	}
	return sum
}

// below is the share of the observations of histogram name since first
// that were at most le, a bucket's bound.
func (m metrics) below(first metrics, name string, le float64) float64 {
	key := fmt.Sprintf("%s_bucket{le=%q}", name, strconv.FormatFloat(le, 'g', -1, 64))
	total := m[name+"_count"] - first[name+"_count"]
	if total == 0 {
		return 0
	}
	return (m[key] - first[key]) / total
}

// quantile is the upper bound of the bucket of histogram name where
// quantile q falls, counting the observations since first.
func (m metrics) quantile(first metrics, name string, q float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	for k, v := range m {
		if !strings.HasPrefix(k, name+"_bucket{") {
			continue
		}
		i := strings.Index(k, `le="`)
		le, err := strconv.ParseFloat(strings.TrimSuffix(k[i+4:], `"}`), 64)
		if err != nil {
			le = math.Inf(1)
		}
		bs = append(bs, bucket{le, v - first[k]})
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return 0
	}
	total := bs[len(bs)-1].n
	for _, x := range bs {
		if x.n >= q*total {
			return x.le
		}
	}
	return math.Inf(1)
}
