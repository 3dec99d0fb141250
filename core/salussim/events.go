package salussim

import "container/heap"

// event is a job's whole-GPU run or one of its iterations ending. An
// iteration's end moves when its GPU's speed changes; ver tells the
// current event from stale ones.
type event struct {
	at  float64
	seq uint64
	job *simJob
	ver int
}

// events is a min-heap by time, then push order.
type events []event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// queue wraps the heap with a push counter.
type queue struct {
	h   events
	seq uint64
}

func (q *queue) push(at float64, j *simJob) {
	q.seq++
	heap.Push(&q.h, event{at: at, seq: q.seq, job: j, ver: j.ver})
}

// next drops stale events and returns the earliest live one's time.
func (q *queue) next() (float64, bool) {
	for len(q.h) > 0 {
		e := q.h[0]
		if e.ver == e.job.ver && !e.job.done {
			return e.at, true
		}
		heap.Pop(&q.h)
	}
	return 0, false
}

func (q *queue) pop() event { return heap.Pop(&q.h).(event) }
