package sched

import "fmt"

// GPUs change hands only when the job that held them has left them: a
// preempted job may save a checkpoint for its grace period before it
// exits, and a job started on its GPUs meanwhile would run out of memory
// beside it. The caller (the live engine, the simulator) knows which GPUs
// a stopping job still holds; HandOver keeps back the starts that need
// them, so that both apply the scheduler's decisions the same way.

// HandOver splits starts into those that may be made now and waits for
// those that need a GPU in held (the GPUs of jobs asked to stop that have
// not yet exited, by the job that holds each). The kept-back jobs start
// in a later pass.
func HandOver(starts []Start, held map[GPURef]int64) (now []Start, waits []Wait) {
	if len(held) == 0 {
		return starts, nil
	}
	for _, s := range starts {
		by, gpu, ok := heldGPU(s.GPUs, held)
		if !ok {
			now = append(now, s)
			continue
		}
		waits = append(waits, Wait{JobID: s.JobID, Cause: WaitCapacity,
			Reason: fmt.Sprintf("starts once job %d has released %s:%d: it was asked to stop and may save a checkpoint first (up to the grace period)", by, gpu.Node, gpu.Index)})
	}
	return now, waits
}

func heldGPU(gpus []GPURef, held map[GPURef]int64) (int64, GPURef, bool) {
	for _, g := range gpus {
		if by, ok := held[g]; ok {
			return by, g, true
		}
	}
	return 0, GPURef{}, false
}
