package sched

import "math"

// policyKind is a policy as the pass sees it: an order over jobs and
// whether that order may preempt.
type policyKind int

const (
	kindFIFO policyKind = iota
	kindFJF
	kindSRTF
	kindSRSF
	kindDLAS
	kindLAS2D
	kindGittins
)

var kindByName = map[string]policyKind{
	"fifo":       kindFIFO,
	"fjf":        kindFJF,
	"srtf":       kindSRTF,
	"srsf":       kindSRSF,
	"dlas":       kindDLAS,
	"tiresias-l": kindLAS2D,
	"tiresias-g": kindGittins,
}

// queued policies sort jobs into priority queues by service.
func (k policyKind) queued() bool { return k >= kindDLAS }

// preemptive policies order running and pending jobs together: a pending
// job may take the GPUs of running jobs ranked below it.
func (k policyKind) preemptive() bool { return k >= kindSRTF }

// entry is one job in the pass's priority order. The order compares
// (fk, k0, k1, k2, k3, id), lowest first: fk is the fair-share tier (0
// without fair share), k0 to k3 the policy's key.
type entry struct {
	k0, k1, k2, k3 float64
	id             int64
	job            int32 // index in Snapshot.Jobs
	run            int32 // index in pass.runs when running, else -1
	queue          int32
	gpus           int32
	// fk is 0 for a job within its team's guarantee (and for every job
	// without fair share), 2 - F for a borrower of a team whose
	// fair-share factor is F: borrowers come after, best factor first.
	fk float64
}

// compareEntries orders entries by their keys, which key keeps free of
// NaN, then by job ID.
func compareEntries(a, b *entry) int {
	switch {
	case a.fk != b.fk:
		return order(a.fk < b.fk)
	case a.k0 != b.k0:
		return order(a.k0 < b.k0)
	case a.k1 != b.k1:
		return order(a.k1 < b.k1)
	case a.k2 != b.k2:
		return order(a.k2 < b.k2)
	case a.k3 != b.k3:
		return order(a.k3 < b.k3)
	case a.id != b.id:
		return order(a.id < b.id)
	}
	return 0
}

// compareKeys orders entries by the policy's key alone, leaving out the
// fair-share tier: the order within a team.
func compareKeys(a, b *entry) int {
	switch {
	case a.k0 != b.k0:
		return order(a.k0 < b.k0)
	case a.k1 != b.k1:
		return order(a.k1 < b.k1)
	case a.k2 != b.k2:
		return order(a.k2 < b.k2)
	case a.k3 != b.k3:
		return order(a.k3 < b.k3)
	case a.id != b.id:
		return order(a.id < b.id)
	}
	return 0
}

func order(less bool) int {
	if less {
		return -1
	}
	return 1
}

// noNaN ranks a key that is not a number last.
func noNaN(k float64) float64 {
	if k != k {
		return math.Inf(1)
	}
	return k
}

// key fills e's sort key for job j, whose queue state is qs.
//
//	fifo, fjf:   (submit time)
//	srtf:        (remaining time, running first, submit time)
//	srsf:        (remaining time x GPUs, running first, submit time)
//	dlas, tiresias-l: (queue, running first, queue-entry time)
//	tiresias-g:  (queue, higher Gittins index, running first, queue-entry time)
func (p *pass) key(e *entry, j *Job, qs *QueueState) {
	run := 1.0
	if j.State == Running {
		run = 0
	}
	switch p.sc.kind {
	case kindFIFO, kindFJF:
		e.k0 = j.SubmitTime
	case kindSRTF, kindSRSF:
		rem := math.Inf(1)
		if j.DurationS > 0 {
			rem = max(j.DurationS-j.ExecutedS, 0)
			if p.sc.kind == kindSRSF {
				rem *= float64(max(j.GPUs, 1))
			}
		}
		e.k0, e.k1, e.k2 = rem, run, j.SubmitTime
	case kindDLAS, kindLAS2D:
		e.k0, e.k1, e.k2 = float64(qs.Index), run, since(j, qs)
	case kindGittins:
		a := p.cycleService(j, qs)
		g := p.dist.Index(a, p.sc.delta)
		e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), -g, run, since(j, qs)
	}
	e.k0, e.k1, e.k2, e.k3 = noNaN(e.k0), noNaN(e.k1), noNaN(e.k2), noNaN(e.k3)
	e.queue = int32(qs.Index)
	e.fk = 0
}

// rankValue is the quantity the policy ranks e by, for explanations:
// remaining time or service, service attained in the cycle, or Gittins
// index.
func (p *pass) rankValue(e *entry) float64 {
	switch p.sc.kind {
	case kindSRTF, kindSRSF:
		return e.k0
	case kindDLAS, kindLAS2D:
		return p.cycleService(&p.s.Jobs[e.job], &p.qs[e.job])
	case kindGittins:
		return -e.k1
	}
	return 0
}

// since is when the job entered its queue.
func since(j *Job, qs *QueueState) float64 {
	if qs.Since == 0 {
		return j.SubmitTime
	}
	return qs.Since
}
