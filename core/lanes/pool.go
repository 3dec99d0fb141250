package lanes

import (
	"fmt"
	"math"

	"github.com/gpuportal/gpuportal/core/memest"
)

// Pool shares a set of GPUs: it chooses each job's GPU, queues the jobs
// that fit nowhere yet, and reserves a GPU for a job that has waited
// AgingS, so that a stream of small jobs cannot starve a large one. A
// GPU may also be held exclusively for a job outside the lanes (a
// whole-GPU job); a held GPU admits nothing.
type Pool struct {
	cfg     Config
	gpus    []*GPU
	held    []bool
	where   map[int64]*GPU // admitted jobs
	queue   []*waiter      // waiting jobs, in submit order
	waiters map[int64]*waiter
	reserve *reservation
	drain   *reservation // lanes of GPU gpu drain for waiting job job
}

// waiter is a job that waits for room.
type waiter struct {
	job   Job
	mem   memest.Estimate // padded
	since float64
}

// reservation keeps GPU gpu for waiting job job: no other job is
// admitted there until job is.
type reservation struct {
	job int64
	gpu int
}

// NewPool returns a pool of GPUs with the given capacities in MiB; GPU i
// has index i.
func NewPool(capacitiesMiB []int64, cfg Config) (*Pool, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg, held: make([]bool, len(capacitiesMiB)), where: make(map[int64]*GPU), waiters: make(map[int64]*waiter)}
	for i, c := range capacitiesMiB {
		g, err := NewGPU(i, c, cfg)
		if err != nil {
			return nil, fmt.Errorf("pool: %w", err)
		}
		p.gpus = append(p.gpus, g)
	}
	return p, nil
}

// Len is the number of GPUs.
func (p *Pool) Len() int { return len(p.gpus) }

// Where returns the GPU job id is admitted to.
func (p *Pool) Where(id int64) (gpu int, ok bool) {
	g, ok := p.where[id]
	if !ok {
		return -1, false
	}
	return g.index, true
}

// Held is the padded estimate admitted job id holds now (see GPU.Held).
func (p *Pool) Held(id int64) (memest.Estimate, bool) {
	g, ok := p.where[id]
	if !ok {
		return memest.Estimate{}, false
	}
	return g.Held(id)
}

// Submit queues job j at time now. It fails with ErrTooLarge when j's
// padded P + E exceeds every GPU's capacity, since no wait would help.
func (p *Pool) Submit(j Job, now float64) error {
	if err := j.check(); err != nil {
		return fmt.Errorf("pool submit: %w", err)
	}
	if math.IsNaN(now) {
		return fmt.Errorf("pool submit job %d at %v: %w", j.ID, now, ErrBadInput)
	}
	if p.known(j.ID) {
		return fmt.Errorf("pool submit job %d: %w", j.ID, ErrDuplicate)
	}
	mem := p.cfg.Padding.Apply(j.Memory)
	fits := false
	for _, g := range p.gpus {
		fits = fits || mem.TotalMiB() <= g.capacity
	}
	if !fits {
		return fmt.Errorf("pool submit job %d: P %d + E %d MiB padded: %w", j.ID, mem.PersistentMiB, mem.EphemeralMiB, ErrTooLarge)
	}
	w := &waiter{job: j, mem: mem, since: now}
	p.queue = append(p.queue, w)
	p.waiters[j.ID] = w
	return nil
}

// known reports whether id waits or is admitted.
func (p *Pool) known(id int64) bool {
	_, admitted := p.where[id]
	_, waits := p.waiters[id]
	return admitted || waits
}

func (p *Pool) waiterIndex(id int64) int {
	for i, w := range p.queue {
		if w.job.ID == id {
			return i
		}
	}
	return -1
}

// Cancel removes a waiting job from the queue.
func (p *Pool) Cancel(id int64) error {
	i := p.waiterIndex(id)
	if i < 0 {
		return fmt.Errorf("pool cancel job %d: %w", id, ErrUnknownJob)
	}
	p.dequeue(i)
	return nil
}

// dequeue drops waiter i and its reservation.
func (p *Pool) dequeue(i int) {
	id := p.queue[i].job.ID
	if p.reserve != nil && p.reserve.job == id {
		p.reserve = nil
	}
	p.stopDrain(id)
	delete(p.waiters, id)
	p.queue = append(p.queue[:i], p.queue[i+1:]...)
}

// Release removes an admitted job from its GPU (see GPU.Release).
func (p *Pool) Release(id int64) error {
	g, ok := p.where[id]
	if !ok {
		return fmt.Errorf("pool release job %d: %w", id, ErrUnknownJob)
	}
	delete(p.where, id)
	return g.Release(id)
}

// Hold marks GPU i as held exclusively outside the lanes. Only an empty
// GPU that is neither reserved nor drained for a waiting job can be held.
func (p *Pool) Hold(i int) error {
	if err := p.checkIndex(i); err != nil {
		return err
	}
	switch {
	case p.held[i]:
		return fmt.Errorf("pool hold GPU %d: %w", i, ErrHeld)
	case !p.gpus[i].Empty() || p.kept(i):
		return fmt.Errorf("pool hold GPU %d: %w", i, ErrBusy)
	}
	p.held[i] = true
	return nil
}

// Unhold gives a held GPU back to the lanes.
func (p *Pool) Unhold(i int) error {
	if err := p.checkIndex(i); err != nil {
		return err
	}
	if !p.held[i] {
		return fmt.Errorf("pool unhold GPU %d: not held: %w", i, ErrBadInput)
	}
	p.held[i] = false
	return nil
}

func (p *Pool) checkIndex(i int) error {
	if i < 0 || i >= len(p.gpus) {
		return fmt.Errorf("pool has no GPU %d: %w", i, ErrBadInput)
	}
	return nil
}

// kept reports whether GPU i is reserved or drained for a waiting job.
func (p *Pool) kept(i int) bool {
	return p.reservedGPU() == i || (p.drain != nil && p.drain.gpu == i)
}

// reservedGPU is the reserved GPU's index, -1 when none.
func (p *Pool) reservedGPU() int {
	if p.reserve == nil {
		return -1
	}
	return p.reserve.gpu
}

// Idle lists the GPUs that are empty, not held, and neither reserved nor
// drained for a waiting job: those a whole-GPU job may Hold.
func (p *Pool) Idle() []int {
	var out []int
	for i, g := range p.gpus {
		if g.Empty() && !p.held[i] && !p.kept(i) {
			out = append(out, i)
		}
	}
	return out
}

// WaitView is a waiting job.
type WaitView struct {
	ID     int64
	SinceS float64
	// Memory is the padded estimate the job needs.
	Memory memest.Estimate
	// ReservedGPU is the GPU kept for the job, -1 when none.
	ReservedGPU int
}

// Waiting lists the waiting jobs in submit order.
func (p *Pool) Waiting() []WaitView {
	out := make([]WaitView, len(p.queue))
	for i, w := range p.queue {
		out[i] = WaitView{ID: w.job.ID, SinceS: w.since, Memory: w.mem, ReservedGPU: -1}
		if p.reserve != nil && p.reserve.job == w.job.ID {
			out[i].ReservedGPU = p.reserve.gpu
		}
	}
	return out
}

// View returns every GPU's state, with Held and ReservedFor filled in.
func (p *Pool) View() []GPUView {
	out := make([]GPUView, len(p.gpus))
	for i, g := range p.gpus {
		out[i] = g.View()
		out[i].Held = p.held[i]
		if p.reservedGPU() == i {
			out[i].ReservedFor = p.reserve.job
		}
		if p.drain != nil && p.drain.gpu == i {
			out[i].DrainingFor = p.drain.job
		}
	}
	return out
}

// Check verifies every GPU's invariants and the pool's own: held GPUs
// are empty, each admitted job is on the GPU the pool records, no job is
// both waiting and admitted, and the reservation names a waiting job and
// a GPU that is not held.
func (p *Pool) Check() error {
	n := 0
	for i, g := range p.gpus {
		if err := g.Check(); err != nil {
			return err
		}
		if p.held[i] && !g.Empty() {
			return fmt.Errorf("pool: held GPU %d has jobs", i)
		}
		for _, id := range g.JobIDs() {
			if p.where[id] != g {
				return fmt.Errorf("pool: job %d on GPU %d misfiled", id, i)
			}
			n++
		}
	}
	if n != len(p.where) {
		return fmt.Errorf("pool: %d jobs on GPUs, %d recorded", n, len(p.where))
	}
	seen := map[int64]bool{}
	for _, w := range p.queue {
		if seen[w.job.ID] || p.where[w.job.ID] != nil || p.waiters[w.job.ID] != w {
			return fmt.Errorf("pool: job %d waits twice, waits and runs, or is misfiled", w.job.ID)
		}
		seen[w.job.ID] = true
	}
	if len(seen) != len(p.waiters) {
		return fmt.Errorf("pool: %d jobs queued, %d recorded", len(seen), len(p.waiters))
	}
	if r := p.reserve; r != nil && (!seen[r.job] || r.gpu < 0 || r.gpu >= len(p.gpus) || p.held[r.gpu]) {
		return fmt.Errorf("pool: bad reservation of GPU %d for job %d", r.gpu, r.job)
	}
	for i, g := range p.gpus {
		if len(g.draining) > 0 && (p.drain == nil || p.drain.gpu != i) {
			return fmt.Errorf("pool: GPU %d drains lanes for no job", i)
		}
	}
	if d := p.drain; d != nil && (!seen[d.job] || p.held[d.gpu]) {
		return fmt.Errorf("pool: bad drain of GPU %d for job %d", d.gpu, d.job)
	}
	return nil
}
