package hub

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestRemoteAgentResourcesAndUsage: a remote job's allocation travels in
// its start, a resize reaches the agent, and its use comes back in the
// heartbeats.
func TestRemoteAgentResourcesAndUsage(t *testing.T) {
	_, srv, reg := startHub(t, false)
	a := startClient(t, srv.URL, nil, "gpu-a")
	n := waitNode(t, reg, "gpu-a")
	ctx := context.Background()
	if err := n.Start(ctx, job.Spec{JobID: 4, Run: 1, SimRemaining: time.Hour, GPUs: []int{0},
		Resources: &job.Resources{CPUMilli: 6000, MemMiB: 16384, PropCPUMilli: 8000}}); err != nil {
		t.Fatal(err)
	}
	local := func() job.Usage {
		for _, u := range a.JobUsage(time.Now()) {
			if u.JobID == 4 {
				return u
			}
		}
		return job.Usage{}
	}
	if u := local(); u.CPUMilli != 6000 || u.MemMiB != 16384 {
		t.Fatalf("agent holds %+v, want the allocation sent with the start", u)
	}
	rz, ok := n.(engine.Resizer)
	if !ok {
		t.Fatal("a remote machine cannot resize")
	}
	if err := rz.Resize(ctx, 4, job.Resources{CPUMilli: 3000, MemMiB: 8192}); err != nil {
		t.Fatal(err)
	}
	if u := local(); u.CPUMilli != 3000 || u.MemMiB != 8192 {
		t.Errorf("after resize the agent holds %+v", u)
	}
	if err := rz.Resize(ctx, 99, job.Resources{CPUMilli: 1000}); err == nil {
		t.Error("resizing a job the machine does not run succeeded")
	}
	ur := n.(engine.UsageReporter)
	waitUntil(t, "a heartbeat with job 4's use", func() bool {
		us := ur.JobUsage(time.Now())
		return len(us) == 1 && us[0].JobID == 4 && us[0].CPUMilli == 3000 && us[0].UsedCPUMilli > 0
	})
}
