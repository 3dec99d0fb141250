package sched

// The least-attained-service family: dlas and tiresias-l sort jobs into
// priority queues by the service they have attained (queues.go) and serve
// queue 0 first. Both preempt: a waiting job may take the GPUs of running
// jobs ranked below it.
//
// Within a queue, dlas runs the running jobs first, then the waiting ones
// in the order they entered the queue. tiresias-l has three rules for the
// order within a queue (docs/scheduling.md, "Order within a queue"):
//
//   - preempted-first (the default): as dlas, but a job preempted in a
//     pass goes back ahead of the jobs already waiting in its queue
//     (queues.go, preemptedFirst).
//   - queue-entry: as dlas; the rule of this core before preempted-first.
//   - reference: the Tiresias simulator's list per queue. Preempted first
//     too; running jobs in the order they began to run in the queue, so
//     the most recently started is preempted first; and a job demoted in
//     a pass ranks behind the waiting jobs of its new queue for that pass.

var dlasPolicy = &policy{
	info: PolicyInfo{Name: "dlas",
		Summary: "discretized least attained service on executed time, preemptive",
		Source:  "Tiresias (NSDI'19), its 1D baseline", Preemptive: true},
	preempts:            true,
	queues:              byExecuted,
	runningFirstInQueue: true,
	key:                 lasKey,
	rank:                lasRank,
}

var lasPolicy = &policy{
	info:                lasInfo,
	rule:                "preempted-first",
	preempts:            true,
	queues:              byAttained,
	runningFirstInQueue: true,
	preemptedFirst:      true,
	key:                 lasKey,
	rank:                lasRank,
	rules:               []*policy{lasQueueEntryPolicy, lasLeastServicePolicy, lasReferencePolicy},
}

var lasQueueEntryPolicy = &policy{
	info:                lasInfo,
	rule:                "queue-entry",
	preempts:            true,
	queues:              byAttained,
	runningFirstInQueue: true,
	key:                 lasKey,
	rank:                lasRank,
}

var lasLeastServicePolicy = &policy{
	info:                lasInfo,
	rule:                "least-service",
	preempts:            true,
	queues:              byAttained,
	runningFirstInQueue: true,
	key:                 lasLeastServiceKey,
	rank:                lasRank,
}

// lasLeastServiceKey is (queue, running first, least attained service in
// the cycle, queue-entry time).
func lasLeastServiceKey(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
	e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), run, p.cycleService(j, qs), since(j, qs)
}

var lasReferencePolicy = &policy{
	info:           lasInfo,
	rule:           RuleReference,
	preempts:       true,
	queues:         byAttained,
	preemptedFirst: true,
	demotedBehind:  true,
	// A demoted job ranks behind waiting jobs: not running first.
	runningFirstInQueue:       false,
	runningFirstUnlessDemoted: true,
	key:                       lasListKey,
	rank:                      lasRank,
}

var lasInfo = PolicyInfo{Name: "tiresias-l",
	Summary: "2D-LAS: queues by attained service (GPUs x seconds); within a queue running jobs, then a just-preempted job, then FIFO; preemptive",
	Source:  "Tiresias (NSDI'19)", Preemptive: true}

// lasKey is (queue, running first, queue-entry time).
func lasKey(_ *pass, e *entry, j *Job, qs *QueueState, run float64) {
	e.k0, e.k1, e.k2 = float64(qs.Index), run, since(j, qs)
}

// lasListKey is the Tiresias simulator's list order within a queue:
//
//	running:             (queue, 0, when it began to run in the queue, queue-entry time)
//	waiting:             (queue, 1, queue-entry time)
//	demoted in the pass: (queue, 2, 0, queue-entry time)
//
// A running job began to run in its queue when it last started, or when
// it entered the queue, whichever is later; jobs that did so at the same
// time keep their order in the line they came from.
func lasListKey(_ *pass, e *entry, j *Job, qs *QueueState, run float64) {
	s := since(j, qs)
	switch {
	case run != 0:
		e.k0, e.k1, e.k2 = float64(qs.Index), 1, s
	case qs.Index != j.Queue.Index:
		e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), 2, 0, s // demoted in this pass
	default:
		e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), 0, max(j.LastStartTime, s), s
	}
}

// lasRank is "queue 1, 4000 GPU-s attained".
func lasRank(p *pass, b []byte, e *entry) []byte {
	b = appendQueue(b, e)
	b = append(b, ", "...)
	b = appendNum(b, p.cycleService(&p.s.Jobs[e.job], &p.qs[e.job]))
	b = append(b, ' ')
	return append(b, p.pol.queues.unit...)
}
