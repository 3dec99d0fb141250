package sim

import "github.com/gpuportal/gpuportal/core/trace"

// jobIndex finds a job by its trace ID. The scheduler names jobs by ID in
// every decision, so the simulator looks one up for every start,
// preemption and queue change; traces mostly number their jobs densely,
// and then a table indexed by ID less the smallest one replaces a map.
type jobIndex struct {
	base  int64
	dense []*job         // by ID - base, when the IDs are dense enough
	m     map[int64]*job // otherwise
}

// maxSpreadFactor bounds the dense table at this many slots per job (and
// a few more for small traces): past it, the IDs go in a map.
const maxSpreadFactor = 4

// newJobIndex sizes an index for the jobs' IDs.
func newJobIndex(jobs []trace.Job) jobIndex {
	n := len(jobs)
	if n > 0 {
		lo, hi := jobs[0].ID, jobs[0].ID
		for i := range jobs {
			lo, hi = min(lo, jobs[i].ID), max(hi, jobs[i].ID)
		}
		// In uint64 so that a spread past MaxInt64 does not wrap.
		if span := uint64(hi) - uint64(lo); span < uint64(maxSpreadFactor*n+64) {
			return jobIndex{base: lo, dense: make([]*job, span+1)}
		}
	}
	return jobIndex{m: make(map[int64]*job, n)}
}

// get returns the job with this ID, or nil.
func (x *jobIndex) get(id int64) *job {
	if x.m != nil {
		return x.m[id]
	}
	if k := uint64(id) - uint64(x.base); k < uint64(len(x.dense)) {
		return x.dense[k]
	}
	return nil
}

// put adds j under id, which must lie within the bounds the index was
// made for when it is dense.
func (x *jobIndex) put(id int64, j *job) {
	if x.m != nil {
		x.m[id] = j
		return
	}
	x.dense[uint64(id)-uint64(x.base)] = j
}
