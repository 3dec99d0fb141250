package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSlurmMonitorOnlyAgent runs a monitor-only agent on Slurm node n1 of
// a real (throwaway) Slurm cluster: n1's GPU timelines are the agent's
// samples, and the portal says n2's live memory is unavailable, and why,
// in the API and on the page of a job that runs there.
func TestSlurmMonitorOnlyAgent(t *testing.T) {
	c := startSlurm(t)
	srv := startSlurmServer(t, c, "--agent-token", agentToken, "--slurm-gpu-mem", "80", "--max-retries", "0")
	admin := &api{t: t, base: srv.URL, token: slurmAdminToken}
	alice := newAPI(t, srv.URL, "alice", "dev")
	const whyN2 = "no gpuportal agent in monitor mode on node n2; see docs/slurm.md"
	if got := nodes(t, admin)["n1"].LiveMemoryUnavailable; !strings.Contains(got, "monitor mode on node n1") {
		t.Fatalf("n1 before its monitor: %q", got)
	}

	startAgent(t, srv.URL, "n1", "--monitor-only", "--gpus", "sim:1x4x40")
	eventually(t, 20*time.Second, "the monitor of n1", func() bool { return nodes(t, admin)["n1"].LiveMemoryUnavailable == "" })
	if got := nodes(t, admin)["n2"].LiveMemoryUnavailable; got != whyN2 {
		t.Errorf("n2: %q, want %q", got, whyN2)
	}
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
		return fmt.Sprint(last["n1"]) == "[40960 40960 40960 40960]" && fmt.Sprint(last["n2"]) == "[81920 81920 81920 81920]"
	})

	// A job on n1 (n2 cordoned) has live memory; one on n2 (n1
	// cordoned) says why it has none. The monitor starts nothing: Slurm
	// runs both.
	run := func(on, off string) int64 {
		t.Helper()
		if st := admin.do(http.MethodPost, "/api/v1/nodes/"+off+"/cordon", nil, nil); st != http.StatusOK {
			t.Fatalf("cordon %s: %d", off, st)
		}
		if st := admin.do(http.MethodPost, "/api/v1/nodes/"+on+"/uncordon", nil, nil); st != http.StatusOK {
			t.Fatalf("uncordon %s: %d", on, st)
		}
		id := submit(t, alice, map[string]any{"name": "on-" + on, "gpus": 1, "command": []string{"sh", "-c", "echo on $SLURMD_NODENAME; sleep 30"}})
		j := alice.waitState(id, 30*time.Second, "running")
		if !strings.HasPrefix(j.Placement[0], on+":") {
			t.Fatalf("job placed on %v, want %s", j.Placement, on)
		}
		eventually(t, 15*time.Second, "the job's output", func() bool { return jobLog(t, alice, id) == "on "+on+"\n" })
		return id
	}
	onN1 := run("n1", "n2")
	if page := jobPage(t, srv.URL, onN1); strings.Contains(page, "job-live-memory") {
		t.Errorf("the page of a job on n1 says its live memory is unavailable")
	}
	onN2 := run("n2", "n1")
	if page := jobPage(t, srv.URL, onN2); !strings.Contains(page, "unavailable: "+whyN2) {
		t.Errorf("the page of a job on n2 does not say its live memory is unavailable")
	}
	for _, id := range []int64{onN1, onN2} {
		if st := alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil); st >= 300 {
			t.Fatalf("cancel %d: %d", id, st)
		}
		alice.waitState(id, 20*time.Second, "cancelled")
	}
	eventually(t, 20*time.Second, "Slurm to end the jobs", func() bool { return len(c.liveJobs()) == 0 })
}
