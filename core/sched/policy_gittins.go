package sched

import "strconv"

// tiresias-g (2D-Gittins): the queues of tiresias-l; within a queue the
// highest Gittins index of the job's attained service first (gittins.go).

var gittinsPolicy = &policy{
	info: PolicyInfo{Name: "tiresias-g",
		Summary: "2D-Gittins: queues by attained service, Gittins index within a queue, preemptive",
		Source:  "Tiresias (NSDI'19)", Preemptive: true},
	preempts: true,
	queues:   byAttained,
	gittins:  true,
	key:      gittinsKey,
	rank:     gittinsRank,
}

// gittinsKey is (queue, higher Gittins index, running first, queue-entry
// time).
func gittinsKey(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
	g := p.dist.Index(p.cycleService(j, qs), p.sc.delta)
	e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), -g, run, since(j, qs)
}

// gittinsRank is "queue 0, Gittins index 0.004".
func gittinsRank(_ *pass, b []byte, e *entry) []byte {
	b = appendQueue(b, e)
	b = append(b, ", Gittins index "...)
	return strconv.AppendFloat(b, -e.k1, 'g', 3, 64)
}
