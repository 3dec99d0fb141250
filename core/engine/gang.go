package engine

import (
	"fmt"

	"github.com/gpuportal/gpuportal/core/job"
)

// Runs on several machines (docs/multinode.md). The engine starts one
// part per machine, as ever, and tells each where the others are: a
// job.Gang naming every machine in rank order (the order of the
// placement), the first machine's address and a port reserved there for
// the run. A part that fails or is lost stops every part (handleExit,
// losePart), and the run ends, retried or requeued, as one.

// AddrNode is a Node that knows the address other machines reach it at
// (an agent's wire.Node.Addr). A Node without it is taken to be this
// machine's: 127.0.0.1.
type AddrNode interface {
	Addr() string
}

// PortRange is ports From to From+Count-1.
type PortRange struct {
	From, Count int
}

// DefaultMasterPorts are the rendezvous ports when Config.MasterPorts is
// zero: torchrun's default, 29500, and the 499 above it.
var DefaultMasterPorts = PortRange{From: 29500, Count: 500}

// ParsePortRange reads "FROM-TO" (both included), as --master-ports takes it.
func ParsePortRange(s string) (PortRange, error) {
	var from, to int
	if n, err := fmt.Sscanf(s, "%d-%d", &from, &to); err != nil || n != 2 || fmt.Sprintf("%d-%d", from, to) != s {
		return PortRange{}, fmt.Errorf("ports %q: want FROM-TO, such as 29500-29999", s)
	}
	if from < 1024 || to > 65535 || to < from {
		return PortRange{}, fmt.Errorf("ports %q: want 1024 <= FROM <= TO <= 65535", s)
	}
	return PortRange{From: from, Count: to - from + 1}, nil
}

// nodeAddr is the address the other machines reach node at.
func (e *Engine) nodeAddr(name string) string {
	if n, ok := e.node(name).(AddrNode); ok && n.Addr() != "" {
		return n.Addr()
	}
	return "127.0.0.1"
}

// gang returns the rendezvous of run r of j on the machines of order
// (rank order) with the GPUs of perNode, Rank left 0 for the caller to
// set per part, and reserves its port; nil when the run is one process
// on one machine. It reserves the lowest port of the range that no other
// current run uses on the same first machine; when all are taken it
// takes the lowest again, and says so.
func (e *Engine) gang(j Job, r *run, order []string, perNode map[string][]int) *job.Gang {
	if len(order) < 2 && !j.TasksPerGPU {
		return nil
	}
	g := &job.Gang{TasksPerGPU: j.TasksPerGPU}
	for _, name := range order {
		g.Nodes = append(g.Nodes, job.GangNode{Name: name, Addr: e.nodeAddr(name), GPUs: len(perNode[name])})
	}
	ports := e.cfg.MasterPorts
	if ports.Count <= 0 {
		ports = DefaultMasterPorts
	}
	used := make(map[int]bool)
	for id, other := range e.runs {
		if id != j.ID && other.master == order[0] {
			used[other.port] = true
		}
	}
	g.MasterPort = ports.From
	for p := ports.From; p < ports.From+ports.Count; p++ {
		if !used[p] {
			g.MasterPort = p
			break
		}
	}
	if used[g.MasterPort] {
		e.cfg.Logger.Warn("every rendezvous port of the machine is taken: one is shared", "job", j.ID, "node", order[0], "port", g.MasterPort)
	}
	r.master, r.port = order[0], g.MasterPort
	return g
}
