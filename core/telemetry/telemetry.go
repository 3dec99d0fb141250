// Package telemetry keeps the recent history of every GPU and every job's
// GPU memory, as sampled once a second, and fans new samples out to
// subscribers (the portal's live charts).
package telemetry

import (
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// Point is one reading of one GPU.
type Point struct {
	T          int64 // Unix seconds
	MemUsedMiB int64
	MemMiB     int64
	// MemReservedMiB is the driver's own memory (gpu.Sample).
	MemReservedMiB int64 `json:",omitempty"`
	UtilPct        float64
	// Jobs are the jobs with memory on the GPU, as its machine measured.
	Jobs []gpu.JobMem
	// Held are the jobs the scheduler had placed on the GPU when it was
	// read (running jobs' placements): the GPU is busy when there is one,
	// whatever memory they hold yet. Nil when nobody told the recorder.
	Held []int64 `json:",omitempty"`
	// PowerW and TempC are 0 where the GPU does not report them.
	PowerW float64 `json:",omitempty"`
	TempC  int     `json:",omitempty"`
}

// Busy reports whether jobs were placed on the GPU at p: the one rule for
// a GPU being busy in the GPU history, the live charts and the cluster's
// figures (the scheduler's allocation, not the memory jobs hold).
func (p Point) Busy() bool { return len(p.Held) > 0 }

// JobPoint is a job's memory on one GPU at one time.
type JobPoint struct {
	T      int64
	GPU    gpu.Ref
	MemMiB int64
}

// Frame is everything sampled at one instant, as sent to subscribers.
type Frame struct {
	T    int64
	GPUs []GPUFrame
}

// GPUFrame is one GPU's reading within a Frame.
type GPUFrame struct {
	gpu.Ref
	Point
}

// Recorder holds the history. It is safe for concurrent use.
type Recorder struct {
	window  int // points kept per series
	maxJobs int

	mu      sync.Mutex
	gpus    map[gpu.Ref]*ring[Point]
	jobs    map[int64]*ring[JobPoint]
	jobSeen map[int64]int64 // last time a job was sampled, for eviction
	subs    map[chan Frame]struct{}
	feeds   map[*Feed]struct{}
}

// New keeps window seconds of history for each GPU and for up to maxJobs jobs.
func New(window time.Duration, maxJobs int) *Recorder {
	return &Recorder{
		window:  max(1, int(window/time.Second)),
		maxJobs: max(1, maxJobs),
		gpus:    make(map[gpu.Ref]*ring[Point]),
		jobs:    make(map[int64]*ring[JobPoint]),
		jobSeen: make(map[int64]int64),
		subs:    make(map[chan Frame]struct{}),
		feeds:   make(map[*Feed]struct{}),
	}
}

// Record adds the samples of one node at one time and sends the frame to
// subscribers. A subscriber too slow to take it misses it.
func (r *Recorder) Record(node string, samples []gpu.Sample) {
	r.RecordHeld(node, samples, nil)
}

// RecordHeld is Record with held, the jobs placed on each GPU when the
// samples were taken (Holders): the readings of those GPUs are busy.
func (r *Recorder) RecordHeld(node string, samples []gpu.Sample, held map[gpu.Ref][]int64) {
	if len(samples) == 0 {
		return
	}
	f := Frame{T: samples[0].At.Unix()}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range samples {
		k := gpu.Ref{Node: node, Index: s.Index}
		p := Point{T: s.At.Unix(), MemUsedMiB: s.MemUsedMiB, MemMiB: s.MemMiB, MemReservedMiB: s.MemReservedMiB, UtilPct: s.UtilPct,
			Jobs: append([]gpu.JobMem(nil), s.Jobs...), Held: held[k], PowerW: s.PowerW, TempC: s.TempC}
		g := r.gpus[k]
		if g == nil {
			g = newRing[Point](r.window)
			r.gpus[k] = g
		}
		g.add(p)
		for _, jm := range s.Jobs {
			r.addJob(jm.JobID, JobPoint{T: p.T, GPU: k, MemMiB: jm.MemMiB})
		}
		f.GPUs = append(f.GPUs, GPUFrame{Ref: k, Point: p})
	}
	for ch := range r.subs {
		select {
		case ch <- f:
		default:
		}
	}
	for fd := range r.feeds {
		fd.put(f)
	}
}

func (r *Recorder) addJob(id int64, p JobPoint) {
	j := r.jobs[id]
	if j == nil {
		if len(r.jobs) >= r.maxJobs {
			r.evictOldestJob()
		}
		// A job may span several GPUs: room for several points a second.
		j = newRing[JobPoint](r.window * 8)
		r.jobs[id] = j
	}
	j.add(p)
	r.jobSeen[id] = p.T
}

func (r *Recorder) evictOldestJob() {
	var oldest int64
	first := true
	for id, t := range r.jobSeen {
		if first || t < r.jobSeen[oldest] || (t == r.jobSeen[oldest] && id < oldest) {
			oldest, first = id, false
		}
	}
	delete(r.jobs, oldest)
	delete(r.jobSeen, oldest)
}

// GPU returns a GPU's history since the given Unix time, oldest first.
func (r *Recorder) GPU(k gpu.Ref, since int64) []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.gpus[k]
	if g == nil {
		return nil
	}
	return g.since(since, func(p Point) int64 { return p.T })
}

// Job returns a job's memory history since the given Unix time, oldest first.
func (r *Recorder) Job(id int64, since int64) []JobPoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.jobs[id]
	if j == nil {
		return nil
	}
	return j.since(since, func(p JobPoint) int64 { return p.T })
}

// Subscribe returns a channel of new frames; call the returned function to
// stop receiving them.
func (r *Recorder) Subscribe() (<-chan Frame, func()) {
	return r.SubscribeBuffered(4)
}

// SubscribeBuffered is Subscribe with room for n frames, for a subscriber
// that must miss none while it sometimes stalls.
func (r *Recorder) SubscribeBuffered(n int) (<-chan Frame, func()) {
	ch := make(chan Frame, max(1, n))
	r.mu.Lock()
	r.subs[ch] = struct{}{}
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.subs, ch)
		r.mu.Unlock()
	}
}
