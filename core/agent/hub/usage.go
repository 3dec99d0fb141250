package hub

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
)

// setUsage keeps the jobs' CPU and memory use from the agent's latest
// heartbeat, and returns it.
func (n *remoteNode) setUsage(ws []wire.JobUsage) []job.Usage {
	us := wire.Usage(ws)
	n.mu.Lock()
	n.usage = us
	n.mu.Unlock()
	return us
}

// JobUsage is the jobs' CPU and memory use as of the agent's last
// heartbeat (engine.UsageReporter).
func (n *remoteNode) JobUsage(time.Time) []job.Usage {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]job.Usage(nil), n.usage...)
}

// Resize asks the agent to change a running job's allocation
// (engine.Resizer) and waits for its answer.
func (n *remoteNode) Resize(ctx context.Context, jobID int64, r job.Resources) error {
	m := &wire.Message{Type: wire.TypeResize, Resize: &wire.Resize{Node: n.name, JobID: jobID,
		Resources: wire.Resources{CPUMilli: r.CPUMilli, MemMiB: r.MemMiB}}}
	if err := n.conn.request(ctx, m); err != nil {
		return fmt.Errorf("resize job %d on %s: %w", jobID, n.name, err)
	}
	return nil
}
