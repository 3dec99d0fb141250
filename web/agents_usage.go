package web

import (
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/agent/wire"
)

// setUsage keeps the jobs' CPU and memory use from the agent's latest
// heartbeat.
func (n *remoteNode) setUsage(ws []wire.JobUsage) {
	us := make([]agent.JobUsage, len(ws))
	for i, w := range ws {
		us[i] = agent.JobUsageFromWire(w)
	}
	n.mu.Lock()
	n.usage = us
	n.mu.Unlock()
}

// JobUsage is the jobs' CPU and memory use as of the agent's last
// heartbeat (engine.UsageReporter).
func (n *remoteNode) JobUsage(time.Time) []agent.JobUsage {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]agent.JobUsage(nil), n.usage...)
}
