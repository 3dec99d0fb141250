package sched

import (
	"fmt"
	"math"
)

// thresholdSlack absorbs rounding when a caller's clock advances a job's
// service exactly to a threshold (as the simulator does at Recheck).
const thresholdSlack = 1e-9

// cycleService is the service that decides a job's queue, counted since
// its cycle began (its submission or its last promotion): attained
// service (GPU-seconds) for tiresias-l and tiresias-g, executed seconds
// for dlas.
func (p *pass) cycleService(j *Job, qs *QueueState) float64 {
	if p.sc.kind == kindDLAS {
		return nonNeg(j.ExecutedS - qs.CycleExecuted)
	}
	return nonNeg(j.AttainedService - qs.CycleService)
}

// serviceRate is how fast a running job's cycle service grows.
func (p *pass) serviceRate(j *Job) float64 {
	if p.sc.kind == kindDLAS {
		return 1
	}
	return float64(j.GPUs)
}

// level is the queue of a job with cycle service s: the number of
// thresholds s has reached.
func (p *pass) level(s float64) int {
	q := 0
	for q < len(p.sc.thr) && s >= p.sc.thr[q]*(1-thresholdSlack) {
		q++
	}
	return q
}

// advance returns job j's queue state for this pass: demoted to the queue
// its cycle service has reached, or, when waiting and starved, promoted
// to queue 0 with a new cycle. The reason is empty when nothing changed.
func (p *pass) advance(j *Job) (QueueState, string) {
	qs := j.Queue
	s := p.cycleService(j, &qs)
	q := p.level(s)
	if q > 0 && j.State == Pending && p.sc.cfg.PromoteKnob > 0 {
		if run, wait := p.cycleTimes(j, &qs); run > 0 && wait >= p.sc.cfg.PromoteKnob*run*(1-thresholdSlack) {
			from := qs.Index
			qs = QueueState{
				Index: 0, Since: p.now, CycleStart: p.now,
				CycleService: j.AttainedService, CycleExecuted: j.ExecutedS,
				Promotions: qs.Promotions + 1,
			}
			return qs, fmt.Sprintf("promoted from queue %d to queue 0: waited %s s, at least %g x its %s s run in queue cycle",
				from, fmtNum(wait), p.sc.cfg.PromoteKnob, fmtNum(run))
		}
	}
	if q == qs.Index {
		return qs, ""
	}
	from := qs.Index
	qs.Index, qs.Since = q, p.now
	unit := "GPU-s attained service"
	if p.sc.kind == kindDLAS {
		unit = "s executed"
	}
	if q > from {
		return qs, fmt.Sprintf("demoted from queue %d to queue %d: %s %s reached queue %d's limit of %s",
			from, q, fmtNum(s), unit, q-1, fmtNum(p.sc.thr[q-1]))
	}
	return qs, fmt.Sprintf("moved from queue %d to queue %d: %s %s", from, q, fmtNum(s), unit)
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

// queueRecheck returns when job j, with queue state qs, next changes
// queue if it runs (running) or waits (!running) from now on, or 0.
func (p *pass) queueRecheck(j *Job, qs *QueueState, running bool) float64 {
	if running {
		if qs.Index >= len(p.sc.thr) {
			return 0
		}
		rate := p.serviceRate(j)
		if !(rate > 0) {
			return 0
		}
		return p.after((p.sc.thr[qs.Index] - p.cycleService(j, qs)) / rate)
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

// after returns the time dt seconds from now, strictly after now.
func (p *pass) after(dt float64) float64 {
	if math.IsNaN(dt) || math.IsInf(dt, 0) {
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
