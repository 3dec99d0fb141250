package integration

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeView is a machine as GET /api/v1/nodes shows it.
type nodeView struct {
	Name                  string `json:"name"`
	State                 string `json:"state"`
	LiveMemoryUnavailable string `json:"live_memory_unavailable"`
	GPUs                  []struct {
		Index  int    `json:"index"`
		MemMiB int64  `json:"mem_mib"`
		Health string `json:"health"`
		Fault  string `json:"fault"`
	} `json:"gpus"`
	Jobs []int64 `json:"jobs"`
}

func nodes(t *testing.T, a *api) map[string]nodeView {
	t.Helper()
	var ns []nodeView
	if st := a.do(http.MethodGet, "/api/v1/nodes", nil, &ns); st != http.StatusOK {
		t.Fatalf("GET /api/v1/nodes: %d", st)
	}
	out := make(map[string]nodeView)
	for _, n := range ns {
		out[n.Name] = n
	}
	return out
}

// TestGPUFailureIsAnInfrastructureFailure runs a job on an agent whose
// simulated GPUs fall off the bus (XID 79) a second after a job starts on
// them. The job dies with its GPU: it is requeued without counting
// against its retries, its history names the GPU and the XID, and it
// finishes on the other GPU; the failed GPU takes no jobs until an admin
// clears it, even across a restart of the server.
func TestGPUFailureIsAnInfrastructureFailure(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data := t.TempDir()
	args := []string{"--data", data, "--max-retries", "0", "--dev-token", "dev-admin"}
	srv := startAgentServer(t, args...)
	startAgent(t, srv.URL, "gpu-node", "--gpus", "sim:1x2x40", "--sim-fault", "0:xid79@1s,1:xid79@1s")
	waitGPUs(t, srv.URL, 2)
	admin := &api{t: t, base: srv.URL, token: "dev-admin"}
	alice := newAPI(t, srv.URL, "alice", "dev")

	// The first run outlives its GPU and then fails; the second (which
	// finds its checkpoint) succeeds at once.
	script := `if [ -f "$GPUPORTAL_CHECKPOINT_DIR/ran" ]; then echo resumed; exit 0; fi
touch "$GPUPORTAL_CHECKPOINT_DIR/ran"; sleep 3; echo "CUDA error: GPU is lost"; exit 1`
	id := submit(t, alice, map[string]any{"name": "dies-with-its-gpu", "gpus": 1, "command": []string{"sh", "-c", script}})
	j := alice.waitState(id, 60*time.Second, "succeeded", "failed")
	if j.State != "succeeded" || j.Failures != 0 {
		t.Fatalf("job = %+v; want it succeeded with no failure counted (max retries is 0)", j)
	}
	var history []struct{ State, Detail string }
	if st := alice.do("GET", fmt.Sprintf("/api/v1/jobs/%d/history", id), nil, &history); st != http.StatusOK {
		t.Fatalf("history: %d", st)
	}
	var states, notes []string
	var requeue string
	for _, h := range history {
		if strings.HasPrefix(h.Detail, "run 2 ") {
			notes = append(notes, h.Detail) // what run 2 resumed from: a note, not a change of state
			continue
		}
		states = append(states, h.State)
		if h.State == "queued" && h.Detail != "" {
			requeue = h.Detail
		}
	}
	if strings.Join(states, ",") != "queued,running,queued,running,succeeded" {
		t.Errorf("history = %v", states)
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "run 2 resumed from the checkpoint") {
		t.Errorf("history notes of run 2 %q; want one: it resumed from the checkpoint run 1 left", notes)
	}
	first := strings.TrimPrefix(requeue, "requeued: GPU gpu-node/")
	if first == requeue || !strings.HasSuffix(requeue, "reported XID 79 (GPU fell off the bus)") {
		t.Fatalf("requeue reason %q; want the GPU and XID 79 named", requeue)
	}
	failed := strings.TrimSuffix(first, " reported XID 79 (GPU fell off the bus)")
	if len(j.Placement) != 1 || j.Placement[0] == "gpu-node:"+failed {
		t.Errorf("second run on %v; GPU %s had failed", j.Placement, failed)
	}

	// Both GPUs have had a job, so both have failed by now: the API and
	// the cluster page say so, and a new job waits.
	eventually(t, 10*time.Second, "both GPUs out of service", func() bool {
		n := nodes(t, admin)["gpu-node"]
		return len(n.GPUs) == 2 && n.GPUs[0].Health == "unhealthy" && n.GPUs[1].Health == "unhealthy"
	})
	if f := nodes(t, admin)["gpu-node"].GPUs[0].Fault; f != "GPU gpu-node/0 reported XID 79 (GPU fell off the bus)" {
		t.Errorf("GPU 0 fault = %q", f)
	}
	waiting := submit(t, alice, map[string]any{"name": "waits", "gpus": 1, "command": "true"})
	afterPasses(t, srv.URL, 3)
	if st := alice.job(waiting).State; st != "queued" {
		t.Fatalf("a job went to a failed GPU: %s", st)
	}
	b := newBrowser(t, srv.URL)
	b.login("admin", "dev")
	if _, page := b.get("/cluster"); !strings.Contains(page, "unhealthy: GPU gpu-node/1 reported XID 79") || !strings.Contains(page, "/cluster/nodes/gpu-node/gpus/1/clear") {
		t.Errorf("cluster page lacks the failed GPU and its clear button")
	}

	// The server restarts; the agent, with its GPUs' counters unchanged,
	// reconnects. The store keeps both GPUs out of service: the job
	// still waits.
	srv.stop()
	srv = startAgentServerAt(t, srv, args...)
	admin = &api{t: t, base: srv.URL, token: "dev-admin"}
	alice = newAPI(t, srv.URL, "alice", "dev")
	waitGPUs(t, srv.URL, 2)
	n0 := nodes(t, admin)["gpu-node"]
	if len(n0.GPUs) != 2 || n0.GPUs[0].Health != "unhealthy" || n0.GPUs[1].Health != "unhealthy" ||
		n0.GPUs[0].Fault != "GPU gpu-node/0 reported XID 79 (GPU fell off the bus)" {
		t.Fatalf("after the restart: %+v; want both GPUs still out of service, with their faults", n0)
	}
	afterPasses(t, srv.URL, 3)
	if st := alice.job(waiting).State; st != "queued" {
		t.Fatalf("after the restart a job went to a failed GPU: %s", st)
	}
	b = newBrowser(t, srv.URL)
	b.login("admin", "dev")

	// Only admins clear a GPU; then it takes jobs again.
	if st := alice.do("POST", "/api/v1/nodes/gpu-node/gpus/0/clear", nil, nil); st != http.StatusForbidden {
		t.Errorf("a researcher cleared a GPU: %d", st)
	}
	if st := admin.malformed().do("POST", "/api/v1/nodes/gpu-node/gpus/x/clear", nil, nil); st != http.StatusBadRequest {
		t.Errorf("clearing GPU x: %d, want 400", st)
	}
	var n nodeView
	if st := admin.do("POST", "/api/v1/nodes/gpu-node/gpus/0/clear", nil, &n); st != http.StatusOK || n.GPUs[0].Health != "ok" || n.GPUs[1].Health != "unhealthy" {
		t.Fatalf("clear GPU 0: %d, %+v", st, n)
	}
	if st := admin.do("POST", "/api/v1/nodes/gpu-node/gpus/0/clear", nil, nil); st != http.StatusNotFound {
		t.Errorf("clearing a healthy GPU: %d, want 404", st)
	}
	if j := alice.waitState(waiting, 30*time.Second, "succeeded"); len(j.Placement) != 1 || j.Placement[0] != "gpu-node:0" {
		t.Errorf("job after the clear ran on %v, want gpu-node:0", j.Placement)
	}
	if _, page := b.get("/admin"); !strings.Contains(page, "gpu.clear") {
		t.Errorf("audit log lacks the clear")
	}
}

// TestCordon cordons a machine running a job: the job keeps running, new
// jobs go elsewhere, and the state shows in the API and on the cluster
// page, whose buttons post with the CSRF token.
func TestCordon(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "2x1x80", "--dev-token", "dev-admin")
	admin := &api{t: t, base: srv.URL, token: "dev-admin"}
	alice := newAPI(t, srv.URL, "alice", "dev")
	long := submit(t, alice, map[string]any{"name": "long", "gpus": 1, "command": "sleep 30"})
	j := alice.waitState(long, 30*time.Second, "running")
	node, _, _ := strings.Cut(j.Placement[0], ":")
	other := map[string]string{"node-0": "node-1", "node-1": "node-0"}[node]

	if st := alice.do("POST", "/api/v1/nodes/"+node+"/cordon", nil, nil); st != http.StatusForbidden {
		t.Errorf("researcher cordons a node: %d, want 403", st)
	}
	if st := admin.do("POST", "/api/v1/nodes/nowhere/cordon", nil, nil); st != http.StatusNotFound {
		t.Errorf("cordon an unknown node: %d, want 404", st)
	}
	var n nodeView
	if st := admin.do("POST", "/api/v1/nodes/"+node+"/cordon", nil, &n); st != http.StatusOK || n.State != "cordoned" {
		t.Fatalf("cordon: %d, %+v", st, n)
	}
	// Through the page's form, as an admin's click does.
	b := newBrowser(t, srv.URL)
	b.login("admin", "dev")
	if _, page := b.get("/cluster"); !strings.Contains(page, "/cluster/nodes/"+node+"/uncordon") || !strings.Contains(page, "/cluster/nodes/"+other+"/cordon") {
		t.Fatalf("cluster page lacks the uncordon and cordon buttons")
	}
	if st, at, _ := b.post("/cluster/nodes/"+other+"/cordon", url.Values{"_csrf": {b.csrf("/cluster")}}); st != http.StatusOK || at != "/cluster" {
		t.Fatalf("cordon form: %d at %s, want the cluster page", st, at)
	}
	if st, _, _ := b.post("/cluster/nodes/"+other+"/uncordon", url.Values{}); st != http.StatusBadRequest && st != http.StatusForbidden {
		t.Errorf("form without its CSRF token: %d, want it refused", st)
	}
	if st := nodes(t, admin)[other].State; st != "cordoned" {
		t.Fatalf("%s is %s after the form, want cordoned", other, st)
	}

	next := submit(t, alice, map[string]any{"name": "next", "gpus": 1, "command": "true"})
	afterPasses(t, srv.URL, 3)
	if st := alice.job(next).State; st != "queued" {
		t.Fatalf("a job started with both nodes cordoned: %s", st)
	}
	if st := alice.job(long).State; st != "running" {
		t.Fatalf("the cordoned node's job is %s, want still running", st)
	}
	if st, at, _ := b.post("/cluster/nodes/"+other+"/uncordon", url.Values{"_csrf": {b.csrf("/cluster")}}); st != http.StatusOK || at != "/cluster" {
		t.Fatalf("uncordon form: %d at %s, want the cluster page", st, at)
	}
	if j := alice.waitState(next, 30*time.Second, "succeeded"); j.Placement[0] != other+":0" {
		t.Errorf("next ran on %v, want %s", j.Placement, other)
	}
	// A drain of a cordoned machine shows as draining until its job is
	// gone; resume makes it ready.
	if st := admin.do("POST", "/api/v1/nodes/"+node+"/drain", nil, &n); st != http.StatusOK || n.State != "draining" {
		t.Errorf("drain a cordoned node with a job: %d, %+v", st, n)
	}
	if st := admin.do("POST", "/api/v1/nodes/"+node+"/resume", nil, &n); st != http.StatusOK || n.State != "ready" {
		t.Errorf("resume: %d, %+v", st, n)
	}
	if _, page := b.get("/admin"); !strings.Contains(page, "node.cordon") || !strings.Contains(page, "node.uncordon") {
		t.Errorf("audit log lacks the cordon and uncordon")
	}
}

// fakeSlurmBin writes sinfo and squeue scripts that describe a Slurm
// cluster of two idle nodes, n1 and n2, with two GPUs each, running
// nothing: enough for serve --executor slurm to discover its nodes.
func fakeSlurmBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	node := func(name string) string {
		return `{"name": "` + name + `", "state": "IDLE", "state_flags": [], "cpus": 8, "real_memory": 16000, "partitions": ["gpu"], "gres": "gpu:2", "reason": ""}`
	}
	scripts := map[string]string{
		"sinfo":  `{"meta": {}, "errors": [], "nodes": [` + node("n1") + `, ` + node("n2") + `]}`,
		"squeue": `{"meta": {}, "errors": [], "jobs": []}`,
	}
	for name, out := range scripts {
		script := "#!/bin/sh\ncat <<'EOF'\n" + out + "\nEOF\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMonitorOnlyAgentOnASlurmNode runs serve --executor slurm over a
// Slurm of two nodes and a monitor-only agent on n1: n1's GPU readings
// come from the agent, and the portal says n2's live memory is
// unavailable, and why. A monitor-only agent's machine is no place for
// jobs: a server with only such an agent starts none.
func TestMonitorOnlyAgentOnASlurmNode(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--executor", "slurm", "--slurm-bin", fakeSlurmBin(t),
		"--slurm-gpu-mem", "80", "--agent-token", agentToken, "--dev-token", "dev-admin")
	admin := &api{t: t, base: srv.URL, token: "dev-admin"}
	eventually(t, 20*time.Second, "Slurm's nodes", func() bool { return len(nodes(t, admin)) == 2 })
	const why = "no gpuportal agent in monitor mode on node n1; see docs/slurm.md"
	if got := nodes(t, admin)["n1"].LiveMemoryUnavailable; got != why {
		t.Fatalf("n1 without a monitor: %q, want %q", got, why)
	}

	mon := startAgent(t, srv.URL, "n1", "--monitor-only", "--gpus", "sim:1x2x40")
	eventually(t, 20*time.Second, "the monitor of n1", func() bool { return nodes(t, admin)["n1"].LiveMemoryUnavailable == "" })
	if got := nodes(t, admin)["n2"].LiveMemoryUnavailable; !strings.Contains(got, "monitor mode on node n2") {
		t.Errorf("n2: %q", got)
	}
	// The GPU wall's timelines are the agent's samples: its simulated
	// GPUs have 40 GB, where Slurm's configuration says 80.
	eventually(t, 20*time.Second, "n1's timelines from its monitor", func() bool {
		var series []struct {
			Node   string `json:"node"`
			Points []struct {
				MemMiB int64 `json:"mem_mib"`
			} `json:"points"`
		}
		if st := admin.do(http.MethodGet, "/api/v1/gpus", nil, &series); st != http.StatusOK {
			t.Fatalf("GET /api/v1/gpus: %d", st)
		}
		last := map[string][]int64{}
		for _, g := range series {
			if len(g.Points) > 0 {
				last[g.Node] = append(last[g.Node], g.Points[len(g.Points)-1].MemMiB)
			}
		}
		return fmt.Sprint(last["n1"]) == "[40960 40960]" && fmt.Sprint(last["n2"]) == "[81920 81920]"
	})
	b := newBrowser(t, srv.URL)
	b.login("admin", "dev")
	if _, page := b.get("/cluster"); !strings.Contains(page, "Live GPU memory is unavailable: no gpuportal agent in monitor mode on node n2") {
		t.Errorf("cluster page does not say n2's live memory is unavailable")
	}
	if !strings.Contains(mon.output(), "monitor-only") {
		t.Errorf("agent output does not say it is monitor-only:\n%s", mon.output())
	}
	mon.stop()
	eventually(t, 20*time.Second, "n1 without its monitor", func() bool { return nodes(t, admin)["n1"].LiveMemoryUnavailable == why })
}

// TestMonitorOnlyAgentRunsNoJobs connects a monitor-only agent to a server
// that runs its own agents: its machine never becomes a place for jobs.
func TestMonitorOnlyAgentRunsNoJobs(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startAgentServer(t, "--data", t.TempDir(), "--dev-token", "dev-admin")
	mon := startAgent(t, srv.URL, "watcher", "--monitor-only")
	eventually(t, 20*time.Second, "the monitor to connect", func() bool { return strings.Contains(mon.output(), "connected to the server") })
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "nowhere", "gpus": 1, "command": "true"})
	afterPasses(t, srv.URL, 3)
	if st := alice.job(id).State; st != "queued" {
		t.Errorf("a job went to a monitor-only agent: %s", st)
	}
	admin := &api{t: t, base: srv.URL, token: "dev-admin"}
	if n := nodes(t, admin); len(n) != 0 {
		t.Errorf("nodes = %v; a monitor is not a node", n)
	}
}
