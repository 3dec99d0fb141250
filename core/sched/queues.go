package sched

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// thresholdSlack absorbs rounding when a caller's clock advances a job's
// service exactly to a threshold (as the simulator does at Recheck).
const thresholdSlack = 1e-9

// cycleService is the service that decides a job's queue, counted since
// its cycle began (its submission or its last promotion), by the policy's
// measure: attained service (GPU-seconds) for tiresias-l and tiresias-g,
// executed seconds for dlas.
func (p *pass) cycleService(j *Job, qs *QueueState) float64 {
	return p.pol.queues.cycle(j, qs)
}

// level is the queue of a job with cycle service s: the number of
// thresholds s has reached.
func (p *pass) level(s float64) int {
	q := 0
	for q < len(p.sc.lim) && s >= p.sc.lim[q] {
		q++
	}
	return q
}

// queueState writes job j's queue state for this pass into qs: demoted to
// the queue its cycle service has reached, or, when waiting and starved,
// promoted to queue 0 with a new cycle. A change is reported in
// Decisions.QueueChanges. It returns the job's cycle service under qs.
func (p *pass) queueState(j *Job, qs *QueueState) float64 {
	*qs = j.Queue
	// The service is read from j.Queue, which qs now copies: reading it
	// back through qs right after the copy's wide stores stalls on
	// store forwarding (a third of queueState's time in a replay).
	s := p.cycleService(j, &j.Queue)
	if j.Class.topQueue() {
		// A session or a high-priority job stays in queue 0 whatever
		// its service; one stored elsewhere (before it was known as
		// one) comes back.
		if qs.Index != 0 {
			from := qs.Index
			qs.Index, qs.Since = 0, p.now
			what := "an interactive session"
			if j.Class == ClassHigh {
				what = "a high-priority job"
			}
			why := ""
			if !p.sc.cfg.OmitReasons {
				why = fmt.Sprintf("moved from queue %d to queue 0: %s stays in queue 0 whatever its service", from, what)
			}
			p.queueChange(j, from, qs, why)
		}
		return s
	}
	q := p.level(s)
	knob := p.sc.cfg.PromoteKnob
	if q == qs.Index && (q == 0 || knob == 0 || j.State != Pending) {
		return s // the common case: nothing changes
	}
	if q > 0 && j.State == Pending && knob > 0 {
		if run, wait := p.cycleTimes(j, qs); run > 0 && wait >= knob*run*(1-thresholdSlack) {
			from := qs.Index
			*qs = QueueState{
				Index: 0, Since: p.now, CycleStart: p.now,
				CycleService: j.AttainedService, CycleExecuted: j.ExecutedS,
				Promotions: qs.Promotions + 1,
			}
			why := ""
			if !p.sc.cfg.OmitReasons {
				why = fmt.Sprintf("promoted from queue %d to queue 0: waited %s s in this cycle, at least %g x its %s s run",
					from, fmtNum(wait), knob, fmtNum(run))
			}
			p.queueChange(j, from, qs, why)
			return 0
		}
	}
	if q == qs.Index {
		return s
	}
	from := qs.Index
	qs.Index, qs.Since = q, p.now
	why := ""
	if !p.sc.cfg.OmitReasons {
		why = p.moveReason(from, q, s)
	}
	p.queueChange(j, from, qs, why)
	return s
}

// moveReason says why a job moves from queue from to queue q with cycle
// service s: "demoted from queue 0 to queue 1: 3250 GPU-seconds reached
// queue 0's limit of 3250", or "moved from queue 2 to queue 1: ..." when
// the limits changed. It is built in one buffer: every demotion of a
// replay asks for one.
func (p *pass) moveReason(from, q int, s float64) string {
	unit := p.pol.queues.unit
	b := make([]byte, 0, 96)
	if q > from && q > 0 {
		b = append(b, "demoted from queue "...)
	} else {
		b = append(b, "moved from queue "...)
	}
	b = strconv.AppendInt(b, int64(from), 10)
	b = append(b, " to queue "...)
	b = strconv.AppendInt(b, int64(q), 10)
	b = append(b, ": "...)
	b = appendNum(b, s)
	b = append(b, ' ')
	b = append(b, unit...)
	if q > from && q > 0 {
		b = append(b, " reached queue "...)
		b = strconv.AppendInt(b, int64(q-1), 10)
		b = append(b, "'s limit of "...)
		b = appendNum(b, p.sc.thr[q-1])
	}
	return string(b)
}

func (p *pass) queueChange(j *Job, from int, qs *QueueState, why string) {
	p.d.QueueChanges = append(p.d.QueueChanges, QueueChange{
		JobID: j.ID, From: from, To: qs.Index, State: *qs, Reason: why})
}

// cycleTimes returns how long job j has run and waited since its cycle
// began.
func (p *pass) cycleTimes(j *Job, qs *QueueState) (run, wait float64) {
	start := qs.CycleStart
	if start == 0 {
		start = j.SubmitTime
	}
	run = nonNeg(j.ExecutedS - qs.CycleExecuted)
	wait = nonNeg(p.now - start - run)
	return run, wait
}

// dueAt returns when job j, in queue state qs with cycle service s, next
// changes queue if it runs (running) or waits from now on; 0 for never.
func (p *pass) dueAt(j *Job, qs *QueueState, s float64, running bool) float64 {
	if j.Class.topQueue() {
		return 0
	}
	if running {
		if qs.Index >= len(p.sc.thr) || qs.Index < 0 {
			return 0
		}
		rate := p.pol.queues.rate(j)
		if !(rate > 0) {
			return 0
		}
		return p.after((p.sc.thr[qs.Index] - s) / rate)
	}
	knob := p.sc.cfg.PromoteKnob
	if knob <= 0 || qs.Index == 0 {
		return 0
	}
	run, wait := p.cycleTimes(j, qs)
	if !(run > 0) {
		return 0
	}
	return p.after(knob*run - wait)
}

// after returns the time dt seconds from now, strictly after now; 0 when
// dt is not a number or infinite.
func (p *pass) after(dt float64) float64 {
	if dt != dt || dt > math.MaxFloat64 || dt < -math.MaxFloat64 {
		return 0
	}
	t := p.now + dt
	if t <= p.now {
		t = math.Nextafter(p.now, math.Inf(1))
	}
	return t
}

func nonNeg(v float64) float64 {
	if v > 0 {
		return v
	}
	return 0
}

// preemptedFirst puts every job preempted in this pass back ahead of the
// jobs already waiting in its queue: its Since becomes just before the
// earliest of theirs (and of now), so later passes serve it first, and a
// job preempted later goes ahead of it in turn. Victims of one queue keep
// their rank order. The new state is reported as a QueueChange within
// the same queue.
func (p *pass) preemptedFirst() {
	late := p.victims[:0]
	for _, ri := range p.preempted {
		// A backfill preempted for a reservation goes back to its own
		// place in line: ahead of the waiting jobs it would pass the
		// next reserved job by (docs/scheduling.md, "Reservations").
		// Not another team's job that had waited its bound (runLent):
		// its team lent its guarantee to the reservation, and its job
		// goes first.
		if r := &p.runs[ri]; r.state&^runReached == runPreempted && r.flags&(runForReservation|runLent) != runForReservation {
			late = append(late, r.ent)
		}
	}
	if len(late) == 0 {
		return
	}
	// The head of each queue's line: the earliest Since of the jobs
	// that wait at the end of the pass, or now.
	head := p.headBuf[:0]
	for range p.sc.Queues() {
		head = append(head, p.now)
	}
	for i, out := range p.outcome {
		if out == outWaiting {
			q := min(max(p.qs[i].Index, 0), len(head)-1)
			head[q] = min(head[q], since(&p.s.Jobs[i], &p.qs[i]))
		}
	}
	// Lowest-ranked first, so that the highest-ranked ends first in line.
	slices.SortFunc(late, func(a, b int32) int { return compareEntries(&p.rents[b], &p.rents[a]) })
	for _, ei := range late {
		e := &p.rents[ei]
		j, qs := &p.s.Jobs[e.job], &p.qs[e.job]
		if p.pol.demotedBehind && qs.Index != j.Queue.Index {
			continue // demoted in this pass: it stays at the back
		}
		q := min(max(qs.Index, 0), len(head)-1)
		head[q] = math.Nextafter(head[q], math.Inf(-1))
		qs.Since = head[q]
		why := ""
		if !p.sc.cfg.OmitReasons {
			why = "preempted: back at the head of queue " + strconv.Itoa(qs.Index) +
				"'s line, ahead of the jobs waiting there (preempted-first)"
		}
		// A running job changed queue in this pass only if it was
		// demoted (promotion is for waiting jobs): then it has a
		// QueueChange already, which takes the new state.
		if qs.Index != j.Queue.Index {
			if k := p.queueChangeOf(j.ID); k >= 0 {
				c := &p.d.QueueChanges[k]
				c.State = *qs
				if why != "" {
					c.Reason += "; " + why
				}
				continue
			}
		}
		p.queueChange(j, j.Queue.Index, qs, why)
	}
	p.headBuf = head
}

// queueChangeOf returns the index of job id's QueueChange in this pass,
// or -1.
func (p *pass) queueChangeOf(id int64) int {
	for k := range p.d.QueueChanges {
		if p.d.QueueChanges[k].JobID == id {
			return k
		}
	}
	return -1
}
