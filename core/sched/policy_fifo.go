package sched

// The arrival-order family: fifo and fjf. Neither preempts; they differ
// in what a job that does not fit does to the jobs behind it.

var fifoPolicy = &policy{
	info: PolicyInfo{Name: "fifo",
		Summary: "arrival order; the first job that does not fit blocks all behind it",
		Source:  "YARN capacity scheduler, the production baseline of Tiresias (NSDI'19)"},
	blocks: true,
	key:    arrivalKey,
	rank:   arrivalRank,
}

var fjfPolicy = &policy{
	info: PolicyInfo{Name: "fjf",
		Summary: "arrival order; a job that does not fit is skipped",
		Source:  "Tiresias simulator's fit-job-first"},
	key:  arrivalKey,
	rank: arrivalRank,
}

// arrivalKey is (arrival: submit time, or when the job re-entered the
// queue at its back).
func arrivalKey(_ *pass, e *entry, j *Job, _ *QueueState, _ float64) {
	e.k0 = arrival(j)
}

func arrivalRank(_ *pass, b []byte, _ *entry) []byte {
	return append(b, "arrival order"...)
}
