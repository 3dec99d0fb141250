package sched

import (
	"math"
	"strconv"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/usage"
)

// unit is one GPU in the pass's team counts (fteam.inUse, g, tent):
// GPUs in millionths, so that a sharing job counts for its share of a
// GPU, as the portal counts it (core/usage).
const unit = 1_000_000

// maxGuarantee bounds a guarantee so that it stays a count in units.
const maxGuarantee = 1 << 40

// heldScratch is heldGPUs's reused memory.
type heldScratch struct {
	on     map[gpu.Ref][]int32
	claims []usage.Claim
	shares []float64
	sum    []float64
}

// heldGPUs sets jheld: what each job counts for in its team's GPUs, in
// units. A running job counts, on each GPU of its placement, the share
// usage.Shares gives it among the running jobs on that GPU: the whole GPU
// when it does not share, its fraction or an equal part when it shares.
// Any other job counts the GPUs it asks for. started, when not nil, gives
// the placements of the jobs started in the pass (by job ID), which then
// count as running: so the jobs marked borrowed after the pass are those
// the portal counts beyond their team's guarantee.
func (p *pass) heldGPUs(started map[int64][]gpu.Ref) {
	jobs := p.s.Jobs
	h := &p.heldTmp
	p.jheld = resize(p.jheld, len(jobs))
	placement := func(i int) ([]gpu.Ref, bool) {
		switch p.outcome[i] {
		case outRunning:
			if jobs[i].State == Leaving {
				return nil, false // its GPUs are its sharers' once it exits
			}
			return jobs[i].Placement, true
		case outStarted:
			g, ok := started[jobs[i].ID]
			return g, ok
		}
		return nil, false
	}
	if h.on == nil {
		h.on = map[gpu.Ref][]int32{}
	}
	for g, js := range h.on {
		h.on[g] = js[:0]
	}
	sharing := false
	for i := range jobs {
		p.jheld[i] = jobGPUs(&jobs[i]) * unit
		if _, on := placement(i); on && jobs[i].Sharing {
			sharing = true
		}
	}
	if !sharing {
		return // no GPU is shared: every job counts its GPUs
	}
	h.sum = resize(h.sum, len(jobs))
	for i := range jobs {
		h.sum[i] = 0
		gpus, _ := placement(i)
		for _, g := range gpus {
			h.on[g] = append(h.on[g], int32(i))
		}
	}
	for _, js := range h.on {
		if len(js) == 0 {
			continue
		}
		h.claims = h.claims[:0]
		for _, i := range js {
			h.claims = append(h.claims, usage.Claim{Sharing: jobs[i].Sharing, Fraction: jobs[i].GPUFraction})
		}
		h.shares = usage.Shares(h.shares, h.claims)
		for k, i := range js {
			h.sum[i] += h.shares[k]
		}
	}
	for i := range jobs {
		if gpus, _ := placement(i); len(gpus) > 0 {
			p.jheld[i] = int(math.Round(h.sum[i] * unit))
		}
	}
}

// appendGPUs appends n units of GPUs as a number of GPUs, to the
// hundredth as the pages write GPUs: "3", "2.5", "0.33".
func appendGPUs(b []byte, n int) []byte {
	if n%unit == 0 {
		return strconv.AppendInt(b, int64(n/unit), 10)
	}
	return strconv.AppendFloat(b, math.Round(float64(n)/unit*100)/100, 'f', -1, 64)
}
