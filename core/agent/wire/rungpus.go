package wire

import (
	"fmt"

	"github.com/gpuportal/gpuportal/core/job"
)

// A reconnecting agent says which GPUs each job it still runs holds, so
// that the server, adopting the run, counts a GPU fault against it only
// on its own GPUs. Without the list (agents before it) the server counts
// any GPU of the machine.

// JobGPUs is the GPUs one running job holds on a machine.
type JobGPUs struct {
	JobID int64 `json:"job_id"`
	Run   int64 `json:"run"`
	GPUs  []int `json:"gpus"`
}

// CheckRunningGPUs checks a machine's RunningGPUs: jobs it lists as
// running, each once, on GPUs the machine has.
func CheckRunningGPUs(n Node) error {
	running := make(map[job.RunRef]bool, len(n.Running))
	for _, r := range n.Running {
		running[r] = true
	}
	seen := make(map[job.RunRef]bool, len(n.RunningGPUs))
	for _, j := range n.RunningGPUs {
		r := job.RunRef{Job: j.JobID, Run: j.Run}
		if !running[r] || seen[r] {
			return fmt.Errorf("machine %s: running_gpus: %s is not running there, or listed twice", n.Name, r)
		}
		seen[r] = true
		for _, g := range j.GPUs {
			if g < 0 || g >= len(n.GPUs) {
				return fmt.Errorf("machine %s: running_gpus: job %d on GPU %d, which the machine does not have", n.Name, j.JobID, g)
			}
		}
	}
	return nil
}
