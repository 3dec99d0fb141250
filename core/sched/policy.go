package sched

import (
	"math"
	"strconv"
)

// policy is one ordering rule as the pass sees it: a value, not a case
// in a switch. Each family lives in its own file (policy_fifo.go,
// policy_srtf.go, policy_las.go, policy_gittins.go) and the table
// policies lists them in the order the portal shows them.
type policy struct {
	// info describes the policy for people (PolicyInfos).
	info PolicyInfo
	// rule names the policy's rule where it has a choice of rules
	// (docs/scheduling.md), "" where it has none.
	rule string
	// rules are the other rules of the same policy, by rule name, which
	// Config.Rule picks; the one named RuleReference is the rule of the
	// Tiresias authors' simulator, which Config.Reference picks. Only
	// the table's entries (the defaults) carry them.
	rules []*policy

	// preempts: the preemption rule. A preemptive policy orders running
	// and pending jobs together, and a pending job may take the GPUs of
	// running jobs ranked below it; otherwise running jobs keep theirs.
	preempts bool
	// blocks: the first pending job that does not fit stops every job
	// behind it (fifo's head-of-line blocking). Otherwise it is skipped.
	blocks bool

	// queues, when not nil, sorts jobs into priority queues by the
	// service it measures (queues.go); nil for the policies without.
	queues *serviceMeasure
	// runningFirstInQueue: every running job of a queue ranks above its
	// pending jobs, so the walk may handle running jobs a queue at a time
	// (below.go) and count what preemption frees per queue.
	runningFirstInQueue bool
	// runningFirstUnlessDemoted: every running job of a queue ranks
	// above its pending jobs but those demoted in the pass, which rank
	// below them (the reference's list order, lasListKey): what
	// preemption frees is counted per queue, as under
	// runningFirstInQueue, plus the demoted jobs' of the pending job's
	// own queue (runDemQ).
	runningFirstUnlessDemoted bool
	// preemptedFirst: a job preempted in a pass goes back ahead of the
	// jobs already waiting in its queue (queues.go).
	preemptedFirst bool
	// demotedBehind: a job demoted in a pass goes behind the jobs
	// waiting in its new queue for that pass, and, if preempted in it,
	// stays behind them (the Tiresias simulator appends it to the
	// queue's list).
	demotedBehind bool
	// gittins: the key reads the distribution of job GPU-time (the
	// prior, Config.GPUTimeSamples, Snapshot.GPUTimeDist).
	gittins bool

	// key fills the sort key (k0 to k3, lowest first; those it leaves
	// are 0) of e, the entry of job j with queue state qs; run is 0 for
	// a running job, 1 for a pending one. Entries live in the pass's
	// slices, so none escapes through the call.
	key func(p *pass, e *entry, j *Job, qs *QueueState, run float64)
	// rank describes, for a preemption's reason, what places e where it
	// is in the order ("queue 1, 4000 GPU-s attained").
	rank func(p *pass, b []byte, e *entry) []byte
}

// serviceMeasure is the service that sorts a job into its queue: executed
// seconds (dlas) or attained service, GPUs x seconds (tiresias-l and
// tiresias-g).
type serviceMeasure struct {
	// executed: seconds run; otherwise GPU-seconds.
	executed bool
	// unit names the measure in reasons.
	unit string
}

var (
	byExecuted = &serviceMeasure{executed: true, unit: "s executed"}
	byAttained = &serviceMeasure{unit: "GPU-s attained"}
)

// cycle is the service job j has attained since its cycle began (qs).
func (m *serviceMeasure) cycle(j *Job, qs *QueueState) float64 {
	var s float64
	if m.executed {
		s = j.ExecutedS - qs.CycleExecuted
	} else {
		s = j.AttainedService - qs.CycleService
	}
	if s > 0 {
		return s
	}
	return 0
}

// rate is how fast a running job's service grows, per second.
func (m *serviceMeasure) rate(j *Job) float64 {
	if m.executed {
		return 1
	}
	return float64(j.GPUs)
}

// policies is the table of policies Config.Policy names, in the order of
// Policies.
var policies = []*policy{fifoPolicy, fjfPolicy, srtfPolicy, srsfPolicy, dlasPolicy, lasPolicy, gittinsPolicy}

// policyByName finds a policy of the table.
func policyByName(name string) *policy {
	for _, pol := range policies {
		if pol.info.Name == name {
			return pol
		}
	}
	return nil
}

// RuleReference names, for the policies with a choice of rules, the rule
// of the Tiresias authors' simulator (Config.Reference).
const RuleReference = "reference"

// withRule returns the policy under the named rule, or nil if it has no
// such rule. The empty name is the default rule.
func (pol *policy) withRule(name string) *policy {
	if name == "" || name == pol.rule {
		return pol
	}
	for _, alt := range pol.rules {
		if alt.rule == name {
			return alt
		}
	}
	return nil
}

// ruleNames lists the policy's rules, the default first.
func (pol *policy) ruleNames() []string {
	if pol.rule == "" {
		return nil
	}
	out := []string{pol.rule}
	for _, alt := range pol.rules {
		out = append(out, alt.rule)
	}
	return out
}

// PolicyRules lists the rules Config.Rule accepts for a policy, its
// default first; nil for a policy with one rule (or no such policy).
func PolicyRules(policy string) []string {
	if pol := policyByName(policy); pol != nil {
		return pol.ruleNames()
	}
	return nil
}

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
	// uk is the entry's slot within its team's pending jobs when fair
	// share inside the team reordered them (userOrder), else 0: it
	// breaks ties of equal keys so that the slots keep their order.
	uk int32
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
	case a.uk != b.uk:
		return order(a.uk < b.uk)
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
	case a.uk != b.uk:
		return order(a.uk < b.uk)
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

// key fills e's sort key for job j, whose queue state is qs, by the
// policy's rule.
func (p *pass) key(e *entry, j *Job, qs *QueueState) {
	run := 1.0
	if j.holds() {
		run = 0
	}
	p.pol.key(p, e, j, qs, run)
	e.k0, e.k1, e.k2, e.k3 = noNaN(e.k0), noNaN(e.k1), noNaN(e.k2), noNaN(e.k3)
	e.queue = int32(qs.Index)
	e.fk, e.uk = 0, 0
}

// since is when the job entered its queue: when the queue state says,
// or on arrival, whichever is later.
func since(j *Job, qs *QueueState) float64 {
	if qs.Since == 0 {
		return arrival(j)
	}
	return max(qs.Since, j.ReenteredAt)
}

// arrival is when the job counts as arrived for the order: its submit
// time, or when it re-entered the queue at its back (Job.ReenteredAt).
func arrival(j *Job) float64 {
	return max(j.SubmitTime, j.ReenteredAt)
}

// appendQueue appends "queue N".
func appendQueue(b []byte, e *entry) []byte {
	b = append(b, "queue "...)
	return strconv.AppendInt(b, int64(e.queue), 10)
}
