package sched

// GPUTimeLearner learns tiresias-g's distribution online, the same way in
// the live engine and in the simulator: from a start (the shipped prior
// and the GPU-times of jobs completed before) and each job's GPU-time as
// it completes, with the service attained by the jobs not yet complete
// as lower bounds of theirs (LearnGPUTimeDist). It is not safe for
// concurrent use: its owner (the engine's loop, a simulation) calls it.
type GPUTimeLearner struct {
	done  []float64
	dist  *GPUTimeDist
	dirty bool
}

// NewGPUTimeLearner starts from the shipped prior plus samples, GPU-times
// of jobs completed before (GPU-seconds).
func NewGPUTimeLearner(samples []float64) *GPUTimeLearner {
	done := append(PriorGPUTime(), samples...)
	return &GPUTimeLearner{done: done, dirty: true}
}

// Completed adds the GPU-time of a job that has just completed.
func (l *GPUTimeLearner) Completed(gpuSeconds float64) {
	l.done = append(l.done, gpuSeconds)
	l.dirty = true
}

// Dist returns the distribution learnt so far, for a pass over jobs: it is
// built again, with the service the jobs have attained, after a job has
// completed, and kept between completions.
func (l *GPUTimeLearner) Dist(jobs []Job) *GPUTimeDist {
	if !l.dirty {
		return l.dist
	}
	var running []float64
	for i := range jobs {
		if a := jobs[i].AttainedService; a > 0 {
			running = append(running, a)
		}
	}
	l.dist, l.dirty = LearnGPUTimeDist(l.done, running), false
	return l.dist
}

// Len is the number of completed jobs' GPU-times learnt from, the prior's
// included.
func (l *GPUTimeLearner) Len() int { return len(l.done) }
