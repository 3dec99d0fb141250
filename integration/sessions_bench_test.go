package integration

import (
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"
)

// measureSessionProxy measures what the portal's proxy adds to a request
// to a session: GET
// <prefix>api of the real Jupyter server of session nb, directly on its
// loopback port and through the portal (login cookie checked, the job
// looked up, the portal's credentials stripped, over the agent's tunnel),
// both over keep-alive connections. TestSessions runs it with the session
// it has and logs the figures; nothing is asserted of them.
func measureSessionProxy(t *testing.T, web *browser, a *api, id int64, prefix string) {
	t.Helper()
	// Jupyter says where it listens in its output.
	m := jupyterListens.FindStringSubmatch(jobLog(t, a, id))
	if m == nil {
		t.Fatalf("the session's output names no loopback port:\n%s", jobLog(t, a, id))
	}
	direct := "http://127.0.0.1:" + m[1] + prefix + "api"
	proxied := web.base + prefix + "api"
	directClient := &http.Client{Timeout: 10 * time.Second}
	get := func(c *http.Client, u string) time.Duration {
		t0 := time.Now()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", u, resp.StatusCode)
		}
		return time.Since(t0)
	}
	for range 20 { // both paths' connections open and warm
		get(directClient, direct)
		get(web.c, proxied)
	}
	// Interleaved, so that the machine's other load falls on both alike.
	var d, p time.Duration
	for range sessionBenchRequests {
		d += get(directClient, direct)
		p += get(web.c, proxied)
	}
	n := time.Duration(sessionBenchRequests)
	t.Logf("BenchmarkSessionProxy/direct  %d requests  %v/request", sessionBenchRequests, d/n)
	t.Logf("BenchmarkSessionProxy/proxied %d requests  %v/request", sessionBenchRequests, p/n)
	t.Logf("the proxy adds %v per request: %.2fx direct access", (p-d)/n, float64(p)/float64(d))
}

// jupyterListens finds the port in Jupyter's "running at" line.
var jupyterListens = regexp.MustCompile(`http://127\.0\.0\.1:(\d+)/sessions/`)

// sessionBenchRequests is how many requests each path gets.
const sessionBenchRequests = 300
