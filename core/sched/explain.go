package sched

import (
	"math"
	"strconv"
	"strings"
)

// Explanations are built from the state the pass saw when it reached the
// job: what it needs, what was free, what placement demanded, and where
// it stands in its queue. They are appended into one reused buffer and
// copied out once per job.

// explain records why a pending job that the pass could not start waits:
// cause is placement's refusal (cluster.refusal). Under fair share a
// capacity refusal is refined into the fair-share cause that kept the
// job from the GPUs (fairCause). Reclaimable is what preempting every
// running job ranked below it would free.
func (p *pass) explain(e *entry, r rule, cause WaitCause, reclaimable int) WaitCause {
	cl := &p.cl
	var at float64 // WaitReclaim: when it may reclaim
	switch cause {
	case WaitCapacity:
		if p.fair {
			cause, at = p.fairCause(e, r, reclaimable)
			p.recheckAt(at)
		}
	case WaitLocality:
		p.recheckAt(p.nextRelax(r))
	}
	if p.sc.cfg.OmitWaits {
		return cause
	}
	b := p.buf[:0]
	switch cause {
	case WaitInvalid:
		b = append(b, "requests "...)
		b = strconv.AppendInt(b, int64(r.n), 10)
		b = append(b, " GPUs; a job needs at least one"...)
	case WaitTooLarge:
		b = appendNeeds(b, r.n)
		b = append(b, "; the schedulable nodes have "...)
		b = strconv.AppendInt(b, int64(cl.capacity), 10)
		b = append(b, " in all"...)
	case WaitCapacity, WaitReclaim, WaitTeamShare:
		if p.sh.on && sharesGPU(&p.s.Jobs[e.job]) {
			b = p.appendShareNeeds(b, e)
		} else {
			b = appendNeeds(b, r.n)
			b = append(b, "; "...)
			b = strconv.AppendInt(b, int64(max(cl.free, 0)), 10)
			b = append(b, " free"...)
		}
		if p.count {
			// no blocks to speak of
		} else if big, at := cl.largest(); big > 0 && cl.free > big {
			b = append(b, " (largest block "...)
			b = strconv.AppendInt(b, int64(big), 10)
			b = append(b, " on "...)
			b = append(b, cl.name(int32(at))...)
			b = append(b, ')')
		}
		if p.fair {
			b = p.appendFairCapacity(b, e, cause, reclaimable, at)
		} else if reclaimable > 0 {
			b = append(b, "; preempting every job ranked below it would free only "...)
			b = strconv.AppendInt(b, int64(reclaimable), 10)
			b = append(b, " more"...)
		} else if p.preempt && cl.free < cl.capacity {
			b = append(b, "; the busy GPUs are held by jobs ranked above it"...)
		}
	case WaitLocality:
		b = appendNeeds(b, r.n)
		if r.maxNodes == 1 {
			big, at := cl.largest()
			b = append(b, " on one node; largest free block is "...)
			b = strconv.AppendInt(b, int64(big), 10)
			if at >= 0 {
				b = append(b, " on "...)
				b = append(b, cl.name(int32(at))...)
			}
		} else {
			b = append(b, " on at most "...)
			b = strconv.AppendInt(b, int64(r.maxNodes), 10)
			b = append(b, " nodes; the "...)
			b = strconv.AppendInt(b, int64(r.maxNodes), 10)
			b = append(b, " emptiest have "...)
			b = strconv.AppendInt(b, int64(cl.topSum(r.maxNodes)), 10)
			b = append(b, " free"...)
		}
		if t := p.nextRelax(r); t > 0 {
			b = append(b, "; may use "...)
			b = strconv.AppendInt(b, int64(r.maxNodes+1), 10)
			b = append(b, " nodes after waiting "...)
			b = appendNum(b, t-p.now)
			b = append(b, " s more"...)
		}
	}
	if len(p.rsv) > 0 || p.rsvBehind == e.job {
		b = p.appendReserved(b, e)
	}
	if len(p.behind) > 0 || len(p.behindClass) > 0 {
		b = p.appendBehind(b, e)
	}
	p.addWait(e, cause, b)
	return cause
}

// waitBlocked records a fifo job held behind the first job that did not
// fit.
func (p *pass) waitBlocked(e *entry, head *entry) {
	if p.sc.cfg.OmitWaits {
		return
	}
	b := append(p.buf[:0], "waits behind job "...)
	b = strconv.AppendInt(b, head.id, 10)
	b = append(b, ", which needs "...)
	b = strconv.AppendInt(b, int64(head.gpus), 10)
	b = append(b, " GPUs and does not fit; fifo starts jobs strictly in arrival order"...)
	if len(p.behind) > 0 || len(p.behindClass) > 0 {
		b = p.appendBehind(b, e)
	}
	p.addWait(e, WaitBlocked, b)
}

// waitPreempted records a job preempted earlier in this pass.
func (p *pass) waitPreempted(e *entry) {
	if p.sc.cfg.OmitWaits {
		return
	}
	run := &p.runs[e.run]
	var b []byte
	if run.flags&runReclaimed != 0 {
		by := &p.s.Jobs[run.byJob]
		b = append(p.buf[:0], "reclaimed by team "...)
		b = appendName(b, by.Team)
		b = append(b, " under its guarantee, for job "...)
		b = strconv.AppendInt(b, by.ID, 10)
	} else if run.flags&runForReservation != 0 {
		b = append(p.buf[:0], "preempted for job "...)
		b = strconv.AppendInt(b, run.by, 10)
		b = append(b, ", whose reservation of its GPUs came due"...)
	} else {
		b = append(p.buf[:0], "preempted for job "...)
		b = strconv.AppendInt(b, run.by, 10)
		b = append(b, ", which ranks above it"...)
	}
	if run.flags&runReclaimed != 0 && !p.s.Jobs[e.job].Class.preemptible() {
		b = append(b, "; "...)
		b = appendSessionReclaim(b)
	}
	p.addWait(e, WaitPreempted, b)
}

// addWait appends the queue position to reason b and records the Wait.
func (p *pass) addWait(e *entry, cause WaitCause, b []byte) {
	q := int(e.queue)
	if q < 0 || q >= len(p.qpos) {
		q = len(p.qpos) - 1
	}
	p.qpos[q]++
	pos := int(p.qpos[q])
	b = append(b, "; "...)
	switch pos {
	case 1:
		b = append(b, "first in "...)
	case 2:
		b = append(b, "1 job ahead in "...)
	default:
		b = strconv.AppendInt(b, int64(pos-1), 10)
		b = append(b, " jobs ahead in "...)
	}
	if p.pol.queues != nil {
		b = append(b, "queue "...)
		b = strconv.AppendInt(b, int64(q), 10)
	} else {
		b = append(b, "line"...)
	}
	if p.reasons.Cap()-p.reasons.Len() < len(b) {
		p.reasons = strings.Builder{}
		p.reasons.Grow(max(reasonChunk, len(b)))
	}
	from := p.reasons.Len()
	p.reasons.Write(b)
	reason := p.reasons.String()[from:]
	p.d.Waits = append(p.d.Waits, Wait{JobID: e.id, Queue: q, Position: pos, Cause: cause, Reason: reason})
	p.buf = b
}

// reasonChunk is the size of the blocks wait reasons are written into: a
// long queue's reasons fill many, none copied as the pass goes on (one
// block for all of them was copied whole as it grew), and a block's
// bytes stay fixed once written, so that a reason may point into it.
const reasonChunk = 64 << 10

// preemptReason says why victim gives way to by.
func (p *pass) preemptReason(victim, by *entry) string {
	b := append(p.buf[:0], "preempted for job "...)
	b = strconv.AppendInt(b, by.id, 10)
	b = append(b, " ("...)
	b = p.appendRank(b, by)
	b = append(b, "), which ranks above it ("...)
	b = p.appendRank(b, victim)
	b = append(b, ')')
	p.buf = b
	return string(b)
}

// appendRank describes what places e where it is in the order.
func (p *pass) appendRank(b []byte, e *entry) []byte { return p.pol.rank(p, b, e) }

func appendNeeds(b []byte, n int) []byte {
	b = append(b, "needs "...)
	b = strconv.AppendInt(b, int64(n), 10)
	if n == 1 {
		return append(b, " GPU"...)
	}
	return append(b, " GPUs"...)
}

// appendCount appends n and then one, when n is 1, else many: "1 GPU",
// "2 GPUs".
func appendCount(b []byte, n int, one, many string) []byte {
	b = strconv.AppendInt(b, int64(n), 10)
	if n == 1 {
		return append(b, one...)
	}
	return append(b, many...)
}

// appendNum appends v rounded to a whole number.
func appendNum(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) >= 1e15 {
		return strconv.AppendFloat(b, v, 'g', 4, 64)
	}
	return strconv.AppendInt(b, int64(math.Round(v)), 10)
}

func fmtNum(v float64) string { return string(appendNum(nil, v)) }
