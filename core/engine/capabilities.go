package engine

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// UsageReporter is a Node that reports its jobs' CPU and memory use
// (agent.Local, and remote machines from their heartbeats).
type UsageReporter interface {
	JobUsage(now time.Time) []job.Usage
}

// ResumeReporter is a Node that says, by job, what each run it started
// found in its checkpoint folder (job.Resume), without reporting usage
// (the Slurm executor; agents report it with their usage, job.Usage).
type ResumeReporter interface {
	Resumes() map[int64]job.Resume
}

// Resizer is a Node that can change a running job's CPU and memory
// allocation (agent.Local, and remote machines through their agent).
type Resizer interface {
	Resize(ctx context.Context, jobID int64, r job.Resources) error
}

// RunGPUsReporter is a Node that knows which of its GPUs each running job
// holds, as its agent reported them.
type RunGPUsReporter interface {
	// RunGPUs returns the indices of the GPUs job holds on this machine,
	// and false when the agent did not report them.
	RunGPUs(job int64) ([]int, bool)
}

// LiveMemoryNode is implemented by machines whose GPUs' live memory may be
// unknown (Slurm's, without a monitor).
type LiveMemoryNode interface {
	// LiveMemoryUnavailable says why the machine's live GPU memory is
	// unknown; empty when it is known.
	LiveMemoryUnavailable() string
}

// FilesServer is a Node whose jobs' folders the portal can reach (the
// files API, docs/files.md): in process, or through the agent's tunnel.
type FilesServer interface {
	// JobFiles serves job jobID's folder and data paths as the Unix
	// account.
	JobFiles(jobID int64, account string) jobfiles.Files
}

// A Node does what every machine does (Node); these are the capabilities
// some machines add, which the engine finds by type assertion and does
// without where a machine lacks them. This is the one list of them; each
// machine's package has a test that it has exactly the capabilities it
// claims here, and a machine without one goes without what it offers
// (a GPU fault, for one, counts against every run of a machine that does
// not report its runs' GPUs):
//
//	capability        agent.Local  hub's remote node  slurm's node  kube's node
//	UsageReporter     yes          yes                no            no
//	ResumeReporter    no           no                 yes           yes
//	Resizer           yes          yes                no            no
//	RunGPUsReporter   no           yes                no            yes
//	LiveMemoryNode    no           no                 yes           yes
//	FilesServer       yes          yes                no            no
//
// Capabilities names the capabilities n has, in the order of this list:
// what a machine's test checks against its claim.
func Capabilities(n Node) []string {
	var out []string
	if _, ok := n.(UsageReporter); ok {
		out = append(out, "UsageReporter")
	}
	if _, ok := n.(ResumeReporter); ok {
		out = append(out, "ResumeReporter")
	}
	if _, ok := n.(Resizer); ok {
		out = append(out, "Resizer")
	}
	if _, ok := n.(RunGPUsReporter); ok {
		out = append(out, "RunGPUsReporter")
	}
	if _, ok := n.(LiveMemoryNode); ok {
		out = append(out, "LiveMemoryNode")
	}
	if _, ok := n.(FilesServer); ok {
		out = append(out, "FilesServer")
	}
	return out
}
