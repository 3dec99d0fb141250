package lanes

import (
	"cmp"
	"fmt"
)

// Schedule admits, in submit order, every waiting job that fits now
// (later jobs may pass one that does not fit), and returns their
// placements. With no job left waiting it then defragments (see
// Defragment).
func (p *Pool) Schedule(now float64) []Placement {
	var out []Placement
	for _, w := range append([]*waiter(nil), p.queue...) {
		if pl, err := p.Admit(w.job.ID, now); err == nil {
			out = append(out, pl)
		}
	}
	p.Defragment()
	return out
}

// Admit tries to admit waiting job id now, on the GPU where it fits
// best: a new lane on the GPU it leaves fullest; else the best-fitting
// lane of any GPU (least growth, smallest lane, fewest sharers); else
// the GPU that needs the fewest lane merges. Held GPUs and a GPU
// reserved for another job are skipped. A job that does not fit stays
// waiting (ErrNoRoom). If it has waited AgingS and no reservation
// exists, it gets one: the GPU with the most free memory that could hold
// it, which admits nobody else until it does. If it would fit by merging
// lanes but more than one of them runs an iteration, and no other job
// drains lanes, those lanes are drained: they get no new iterations, and
// once all but one have ended theirs Pool.Finish says Retry (the error
// then also matches ErrDraining). Callers that order jobs
// themselves (a cluster scheduler) call Admit per job; Schedule walks the
// queue in submit order.
func (p *Pool) Admit(id int64, now float64) (Placement, error) {
	w, ok := p.waiters[id]
	if !ok {
		return Placement{}, fmt.Errorf("pool admit job %d: %w", id, ErrUnknownJob)
	}
	var best Placement
	var bestGPU *GPU
	for k, g := range p.gpus {
		if p.held[k] || (p.reserve != nil && p.reserve.gpu == k && p.reserve.job != id) {
			continue
		}
		pl, ok := g.plan(w.mem)
		if !ok {
			continue
		}
		if bestGPU == nil || placementLess(pl, best) {
			best, bestGPU = pl, g
		}
	}
	if bestGPU == nil {
		p.age(w, now)
		if p.startDrain(w) {
			return Placement{}, fmt.Errorf("pool admit job %d: %w: %w on GPU %d", id, ErrNoRoom, ErrDraining, p.drain.gpu)
		}
		return Placement{}, fmt.Errorf("pool admit job %d: %w", id, ErrNoRoom)
	}
	p.stopDrain(id)
	best.Job = id
	bestGPU.apply(w.job, best, now)
	p.where[id] = bestGPU
	p.dequeue(p.waiterIndex(id))
	return best, nil
}

// startDrain drains lanes for w when a merge would fit it once their
// iterations end, and reports whether lanes drain for w. Only one job
// drains lanes at a time.
func (p *Pool) startDrain(w *waiter) bool {
	id := w.job.ID
	if p.drain != nil && p.drain.job != id {
		return false
	}
	var best Placement
	found := false
	for k, g := range p.gpus {
		if p.held[k] || (p.reserve != nil && p.reserve.gpu == k && p.reserve.job != id) {
			continue
		}
		if pl, ok := g.planDrained(w.mem); ok && (!found || placementLess(pl, best)) {
			best, found = pl, true
		}
	}
	p.stopDrain(id)
	if !found {
		return false
	}
	p.drain = &reservation{job: id, gpu: best.GPU}
	p.gpus[best.GPU].drain(best.Merged)
	return true
}

// stopDrain ends the drain for job id, if any.
func (p *Pool) stopDrain(id int64) {
	if p.drain != nil && p.drain.job == id {
		p.gpus[p.drain.gpu].drain(nil)
		p.drain = nil
	}
}

// Drain names the waiting job whose lanes drain and their GPU.
func (p *Pool) Drain() (job int64, gpu int, ok bool) {
	if p.drain == nil {
		return 0, -1, false
	}
	return p.drain.job, p.drain.gpu, true
}

// placementLess orders placements across GPUs: new lanes first (the
// fullest GPU first), then joins (best fit), then merges (fewest first).
func placementLess(a, b Placement) bool {
	if c := cmp.Compare(len(a.Merged), len(b.Merged)); c != 0 {
		return c < 0
	}
	if a.NewLane != b.NewLane {
		return a.NewLane
	}
	if !a.NewLane {
		if c := cmp.Compare(a.GrowthMiB, b.GrowthMiB); c != 0 {
			return c < 0
		}
		if c := cmp.Compare(a.LaneSizeMiB, b.LaneSizeMiB); c != 0 {
			return c < 0
		}
		if c := cmp.Compare(a.Sharers, b.Sharers); c != 0 {
			return c < 0
		}
	}
	if c := cmp.Compare(a.FreeAfterMiB, b.FreeAfterMiB); c != 0 {
		return c < 0
	}
	if a.GPU != b.GPU {
		return a.GPU < b.GPU
	}
	return a.Lane < b.Lane
}

// age gives waiter w a reservation when it has waited AgingS and none
// exists.
func (p *Pool) age(w *waiter, now float64) {
	if p.reserve != nil || p.cfg.AgingS < 0 || now-w.since < p.cfg.AgingS {
		return
	}
	pick := -1
	for k, g := range p.gpus {
		if p.held[k] || w.mem.TotalMiB() > g.capacity {
			continue
		}
		if pick < 0 || g.FreeMiB() > p.gpus[pick].FreeMiB() {
			pick = k
		}
	}
	if pick >= 0 {
		p.reserve = &reservation{job: w.job.ID, gpu: pick}
	}
}

// Defragment spreads jobs that share lanes into lanes of their own
// where memory allows (GPU.Spread), on every GPU, but only when no job
// waits: free memory goes to waiting jobs first. Merging, the other half
// of defragmentation, happens at admission, and lanes shrink on their
// own when jobs leave.
func (p *Pool) Defragment() []Move {
	if len(p.queue) > 0 {
		return nil
	}
	var out []Move
	for k, g := range p.gpus {
		if !p.held[k] {
			out = append(out, g.Spread()...)
		}
	}
	return out
}

// Request routes GPU.Request to the job's GPU.
func (p *Pool) Request(id int64, expectedMiB int64) error {
	g, err := p.gpuOf(id)
	if err != nil {
		return err
	}
	return g.Request(id, expectedMiB)
}

// Grant runs GPU.Grant on every GPU, in index order.
func (p *Pool) Grant(now float64) []Grant {
	var out []Grant
	for _, g := range p.gpus {
		out = append(out, g.Grant(now)...)
	}
	return out
}

// Finish routes GPU.Finish to the job's GPU, and sets Retry when the
// lanes drained there for a waiting job may now be merged.
func (p *Pool) Finish(id int64, now float64, peakMiB int64) (Finished, error) {
	g, err := p.gpuOf(id)
	if err != nil {
		return Finished{}, err
	}
	f, err := g.Finish(id, now, peakMiB)
	if err == nil && p.drain != nil && p.drain.gpu == g.index && g.drained() {
		f.Retry = true
	}
	return f, err
}

func (p *Pool) gpuOf(id int64) (*GPU, error) {
	g, ok := p.where[id]
	if !ok {
		return nil, fmt.Errorf("pool job %d: %w", id, ErrUnknownJob)
	}
	return g, nil
}
