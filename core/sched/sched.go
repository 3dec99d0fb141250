// Package sched is gpuportal's scheduling core: a pure function from a
// snapshot of the cluster to scheduling decisions.
//
// The package does no I/O, reads no clock and starts no goroutines: the
// same snapshot and configuration always give the same decisions. The live
// engine, the trace simulator and the tests all drive it the same way:
//
//	sc, err := sched.New(sched.Config{Policy: "tiresias-l"})
//	d := sc.Schedule(snapshot)
//	// apply d.Preempts, then d.Starts; store every d.QueueChanges[i].State
//	// in the job's Queue field; show d.Waits; call again by d.Recheck.
//
// With teams in the snapshot (Snapshot.Teams), the pass also applies per-team
// fair share: guarantees, lending idle GPUs, reclaiming them, and ordering
// borrowers by a decayed-usage fair-share factor (see FairShare).
//
// docs/scheduling.md describes the policies, the placement steps and the
// knobs; docs/fair-share.md the fair-share rules.
package sched

import (
	"slices"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/synergy"
)

// GPU is one device of a node.
type GPU struct {
	Index  int
	MemMiB int64 // total memory
}

// Node is a machine the scheduler may place jobs on.
type Node struct {
	Name   string
	GPUs   []GPU
	CPUs   int
	MemMiB int64
	// Unschedulable nodes (lost, draining) receive no new jobs; jobs
	// already running there are left alone.
	Unschedulable bool
}

// State is where a job stands from the scheduler's point of view.
type State int

const (
	// Pending jobs wait for GPUs: newly queued or preempted.
	Pending State = iota
	// Running jobs hold the GPUs in their Placement.
	Running
	// Leaving jobs have been asked to stop (preempted, cancelled) and
	// still hold their GPUs while they save a checkpoint and exit: the
	// scheduler counts them held, as a running job's, and neither starts
	// nor preempts the job, which the caller shows without the GPUs it
	// promised to another job meanwhile (Promises.Present). Seen running,
	// a victim in its grace period drew a new victim every pass for the
	// job it was preempted for (docs/simulator.md, "Passes between
	// events").
	Leaving
)

// holds tells whether j holds the GPUs of its Placement: running, or
// leaving.
func (j *Job) holds() bool { return j.State == Running || j.State == Leaving }

// String names the state.
func (s State) String() string {
	switch s {
	case Pending:
		return "pending"
	case Running:
		return "running"
	case Leaving:
		return "leaving"
	}
	return "unknown"
}

// Job is one unfinished job as the scheduler sees it. Times are seconds on
// the caller's clock (wall clock in the server, virtual in the simulator).
// IDs must be unique within a snapshot.
type Job struct {
	ID         int64
	Team       string
	User       string
	GPUs       int   // GPUs requested, all at once (gang)
	GPUMemMiB  int64 // memory needed on each GPU; 0 when unknown
	SubmitTime float64
	State      State
	Placement  []gpu.Ref // the GPUs held while Running

	// ExecutedS is the time the job has run so far, over all its runs.
	ExecutedS float64
	// AttainedService is GPUs held x seconds run, over all runs, a
	// shared GPU counted by the job's share of it (usage.Accrual).
	AttainedService float64
	// HeldGPUs is what a running job holds now, a shared GPU counted by
	// its share of it (usage.Shares); 0: its GPUs, whole. The forecaster
	// counts the rest of the run at it.
	HeldGPUs float64
	// LastStartTime is when the current or most recent run began.
	LastStartTime float64
	// DurationS is the job's known total run time, 0 when unknown. Only
	// clairvoyant policies read it.
	DurationS float64
	// TimeLimitS is the time limit the job declared over all its runs,
	// 0 when none: an upper bound on its run time, which srtf and srsf
	// read under Config.LimitsAsHints when DurationS is unknown.
	TimeLimitS float64

	// Model names the job's model (for example "resnet50", "vgg16"); the
	// built-in catalogue (see Models) says whether its tensor sizes are
	// skewed, which decides whether its GPUs are consolidated.
	Model string
	// Skew is the job's measured tensor-size skew: the largest tensor's
	// share of all parameters, in (0, 1]. Zero means not measured, and the
	// catalogue entry for Model is used.
	Skew float64

	// Sharing: the job may share its GPU with other sharing jobs, Salus
	// style (it asked for a fraction of a GPU, or opted in). Only
	// single-GPU jobs share; whole-GPU jobs stay exclusive. A sharing job
	// is co-located only where the safety condition holds (see
	// docs/salus.md): the persistent memory of a GPU's jobs plus the
	// largest ephemeral memory of each of its lanes fits its memory.
	Sharing bool
	// GPUFraction, in (0, 1), is the share of a GPU a sharing job asked
	// for, 0 when it asked for none. A running sharing job counts in its
	// team's GPUs for the share core/usage gives it (usage.Shares).
	GPUFraction float64
	// MemPersistentMiB and MemEphemeralMiB are a sharing job's memory
	// estimate on its GPU, already padded by the caller (core/memest):
	// persistent memory held for the whole run, and ephemeral memory
	// allocated and freed within each iteration.
	MemPersistentMiB int64
	MemEphemeralMiB  int64

	// CPUMilli (thousandths of a core) and MemMiB are the CPUs and host
	// memory the job asked for; 0 when not said. The allocation step
	// (alloc.go) never gives it less, within its proportional share.
	CPUMilli int64
	MemMiB   int64
	// CPUProfile is the job's sensitivity to CPUs and host memory, nil
	// when not known: the catalogue's profile for Model's family is used
	// then (see JobProfile). CPUProfileSource says where it came from
	// (declared when empty).
	CPUProfile       *synergy.Profile
	CPUProfileSource synergy.Source

	// AvoidNodes are machines the job must not start on: its owner has
	// no Unix account there (the engine learns it from the machines'
	// refusals). Placement passes them over for this job alone, and never
	// preempts for it there.
	AvoidNodes []string

	// ReenteredAt, when later than SubmitTime, is when the job
	// re-entered the queue at its back, as if submitted then: a batch
	// job preempted because its GPUs sat idle (idle reclaim) goes behind
	// the jobs already waiting, so that its GPUs go to them. The
	// policies order it by ReenteredAt where they order by arrival (fifo,
	// fjf, the ties of srtf and srsf, tiresias-g's reference rule) and
	// count it as its queue entry where they order by queue entry (dlas,
	// tiresias-l, tiresias-g's ties); 0 for never. It does not change
	// the service it attained, which still places it in its queue.
	ReenteredAt float64

	// Interactive: the job is an interactive session that asked for
	// interactive priority. Within its team and priority queue it goes
	// ahead of the team's other waiting jobs while the team's sessions
	// hold fewer GPUs with priority than Team.InteractiveGPUs allows
	// (interactive.go); other teams' places are unchanged.
	Interactive bool

	// Class is what kind of work the job is (class.go): ClassBatch, the
	// zero value, or ClassSession, an interactive session, which stays in
	// queue 0, is never preempted by the policy, and is reclaimed by a
	// team under its guarantee only when no batch job that borrows can
	// free enough GPUs.
	Class Class

	// Queue is the priority-queue state the scheduler handed back for
	// this job in an earlier pass (QueueChange.State). The caller stores it
	// and passes it back unchanged; the zero value is right for a new job.
	Queue QueueState
}

// QueueState is what the queue policies (dlas, tiresias-l, tiresias-g)
// remember about a job from one pass to the next. The scheduler computes
// it; the caller only stores it. Its zero value means: in queue 0 since
// submission, never promoted.
type QueueState struct {
	// Index is the job's priority queue, 0 the highest.
	Index int
	// Since is when the job entered queue Index: jobs of a queue are
	// served in this order. Zero means the job's SubmitTime.
	Since float64
	// CycleStart is when the job was last promoted to queue 0 by the
	// starvation rule; zero means never (the cycle began at SubmitTime).
	CycleStart float64
	// CycleService and CycleExecuted are the service the queues do not
	// count: the job's AttainedService and ExecutedS at CycleStart, plus
	// what it attained in handovers since (from a request to stop it to
	// its exit, which the caller adds as the job leaves: the simulator's
	// handover, the engine's run.handover). Queues and ranks are decided
	// by the service attained since then, so a promoted job goes down the
	// queues afresh, and a victim leaves with the rank it had when it was
	// asked to stop.
	CycleService  float64
	CycleExecuted float64
	// Promotions counts starvation promotions.
	Promotions int
}

// Snapshot is everything one scheduling pass looks at.
type Snapshot struct {
	Now   float64
	Nodes []Node
	Jobs  []Job // unfinished jobs only

	// GPUTimeDist, when not nil, replaces the scheduler's distribution of
	// job GPU-time for this pass (tiresias-g only): the caller may grow it
	// with GPUTimeDist.With as jobs complete.
	GPUTimeDist *GPUTimeDist

	// Teams turns on fair share when at least one has a guarantee (see
	// Team and docs/fair-share.md); user caps apply whenever set. Jobs
	// name their team in Job.Team. With no team guaranteeing GPUs, the
	// pass is exactly the pass without teams (user caps aside).
	Teams []Team

	// Reservations are the reservations of the caller's last pass
	// (Decisions.Reservations), handed back unchanged, as Job.Queue is: a
	// reservation stays with its job until the job starts or leaves
	// (reserve.go, "Kept"). Entries for jobs no longer waiting are
	// ignored; nil when the caller keeps none (each pass then reserves
	// afresh).
	Reservations []Reservation
}

// Start asks the caller to start (or resume) a job on the given GPUs.
// Under fair share, Decisions.IsBorrowed tells whether it starts on
// borrowed GPUs.
type Start struct {
	JobID int64
	GPUs  []gpu.Ref
}

// Preempt asks the caller to stop a running job and put it back in the queue.
type Preempt struct {
	JobID  int64
	Reason string
	// For is the job that takes the GPUs this preemption frees.
	For int64
	// Reclaim: the job ran on borrowed GPUs and gives them back to For's
	// team, which is under its guarantee ("reclaimed by team X under its
	// guarantee"). Otherwise the preemption is the policy's own, within
	// one team (or between any jobs when fair share is off).
	Reclaim bool
}

// WaitCause classifies why a job waits.
type WaitCause string

// The causes a Wait may carry.
const (
	// WaitCapacity: fewer GPUs are free (or could be freed by preempting
	// lower-priority jobs) than the job needs.
	WaitCapacity WaitCause = "capacity"
	// WaitLocality: enough GPUs are free, but not on few enough nodes for
	// a job whose GPUs must be consolidated.
	WaitLocality WaitCause = "locality"
	// WaitBlocked: an earlier job that does not fit blocks the queue
	// (fifo's head-of-line blocking).
	WaitBlocked WaitCause = "blocked"
	// WaitTooLarge: the job needs more GPUs than the schedulable nodes
	// have in all.
	WaitTooLarge WaitCause = "too-large"
	// WaitInvalid: the request cannot be scheduled (no GPUs asked for).
	WaitInvalid WaitCause = "invalid"
	// WaitPreempted: the job was preempted in this pass.
	WaitPreempted WaitCause = "preempted"
	// WaitTeamShare: the job would run beyond its team's guarantee, and
	// borrowing is not possible now: no GPUs are lent while a team under
	// its guarantee waits, and a borrower never preempts other teams.
	WaitTeamShare WaitCause = "team-share"
	// WaitUserCap: the job would take its user beyond the GPUs the team
	// lets one user hold.
	WaitUserCap WaitCause = "user-cap"
	// WaitReclaim: the job's team is under its guarantee, and the GPUs it
	// needs are lent to other teams whose jobs have not yet run the
	// minimum runtime (Config.MinRuntimeS); it reclaims them then.
	WaitReclaim WaitCause = "reclaim"
)

// Wait explains why a pending job is not started in this pass. Jobs
// preempted in the pass get one too (Cause WaitPreempted).
type Wait struct {
	JobID    int64
	Queue    int // priority queue, 0 is the highest
	Position int // 1-based position among the waiting jobs of its queue
	// Reason is what the job waits for. The reasons of one pass are
	// parts of one string (a pass of 10,000 waits made 10,000 strings):
	// a caller that keeps a few of them for long clones them
	// (strings.Clone), lest they keep the whole pass's text.
	Reason string
	Cause  WaitCause
}

// QueueChange reports that a job moved between priority queues: demoted
// when its service crossed a queue's threshold, or promoted to queue 0 by
// the starvation rule. The caller must store State in the job's Queue
// field and pass it back in later snapshots.
type QueueChange struct {
	JobID    int64
	From, To int
	State    QueueState
	Reason   string
}

// Decisions is the outcome of one pass. The caller applies Preempts before
// Starts: a start may use GPUs a preemption in the same pass frees.
type Decisions struct {
	Preempts []Preempt
	Starts   []Start
	Waits    []Wait // in priority order; empty when Config.OmitWaits; a new slice each pass, the caller's to keep
	// QueueChanges lists the jobs whose QueueState changed in this pass.
	QueueChanges []QueueChange
	// Recheck is the earliest time at which the same jobs, with no job
	// arriving or finishing, may be scheduled differently: a running job
	// crossing a queue threshold, a waiting job due for promotion, or a
	// job's locality relaxing. Zero when no such time exists. The
	// simulator schedules a pass at Recheck; the engine may ignore it.
	// Under fair share it is also when a borrowed job that a team under
	// its guarantee waits for reaches its minimum runtime.
	Recheck float64
	// Borrowed lists, in increasing order, the jobs running after this
	// pass (kept or started) beyond their team's guarantee: the ones a
	// team under its guarantee may reclaim. Nil when fair share is off.
	Borrowed []int64
	// ReclaimableAt gives, for each job of Borrowed at the same index,
	// when a team under its guarantee may reclaim it: when it has run its
	// minimum runtime since it last started (its reservation bound for a
	// job beyond its team's guarantee that started due, docs/scheduling.md,
	// "Reservations under fair share", rule 4). The past for one that may
	// be reclaimed now.
	ReclaimableAt []float64
	// Allocations gives, for every node a job starts on in this pass, the
	// CPUs and host memory of each job running there after the pass
	// (Config.CPUAlloc decides how), sorted by job ID then node. Empty in
	// count placement and under Config.OmitAllocations.
	Allocations []Allocation
	// Reservations lists, in priority order, the GPUs held back for
	// waiting jobs that have waited past their bound (Config.ReserveAfterS,
	// Team.ReserveAfterS) and cannot start (reserve.go). Empty when none.
	Reservations []Reservation
}

// IsBorrowed tells whether job id runs beyond its team's guarantee after
// the pass: whether it is in d.Borrowed.
func (d *Decisions) IsBorrowed(id int64) bool {
	_, found := slices.BinarySearch(d.Borrowed, id)
	return found
}

// Reclaimable tells when borrowed job id may be reclaimed
// (ReclaimableAt), and whether it is borrowed.
func (d *Decisions) Reclaimable(id int64) (float64, bool) {
	i, found := slices.BinarySearch(d.Borrowed, id)
	if !found || i >= len(d.ReclaimableAt) {
		return 0, false
	}
	return d.ReclaimableAt[i], true
}
