package sched

// The least-attained-service family: dlas and tiresias-l sort jobs into
// priority queues by the service they have attained (queues.go), serve
// queue 0 first, and within a queue run the running jobs first, then the
// waiting ones in the order they entered the queue. Both preempt: a
// waiting job may take the GPUs of running jobs of lower queues, never
// of its own, since those rank above it.
//
// tiresias-l's rule (docs/scheduling.md, "Preempted first"):
// preempted-first, a job preempted in a pass goes back ahead of the jobs
// already waiting in its queue. Under Config.Reference, queue-entry: it
// goes back to its place by queue entry, the rule whose figures are
// traced to the Tiresias simulator's. dlas keeps queue-entry order.

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
	reference:           lasQueueEntryPolicy,
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

var lasInfo = PolicyInfo{Name: "tiresias-l",
	Summary: "2D-LAS: queues by attained service (GPUs x seconds), a just-preempted job first, then FIFO within a queue, preemptive",
	Source:  "Tiresias (NSDI'19)", Preemptive: true}

// lasKey is (queue, running first, queue-entry time).
func lasKey(_ *pass, j *Job, qs *QueueState, run float64) keys {
	return keys{float64(qs.Index), run, since(j, qs)}
}

// lasRank is "queue 1, 4000 GPU-s attained".
func lasRank(p *pass, b []byte, e *entry) []byte {
	b = appendQueue(b, e)
	b = append(b, ", "...)
	b = appendNum(b, p.cycleService(&p.s.Jobs[e.job], &p.qs[e.job]))
	b = append(b, ' ')
	return append(b, p.pol.queues.unit...)
}
