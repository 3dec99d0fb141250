package sched

import (
	"fmt"
	"math"
	"strings"
	"sync"
)

// Placement modes for Config.Placement.
const (
	// PlaceNodes places every job on real GPUs of real nodes: gang,
	// consolidation, locality relaxation, best fit. The default.
	PlaceNodes = "nodes"
	// PlaceCount ignores node boundaries and only counts GPUs, as the
	// Tiresias simulator's "count" scheme does; the trace simulator uses it
	// to reproduce published figures. Starts name no GPUs, and a running
	// job holds Job.GPUs GPUs whatever its Placement. The capacity is the
	// GPUs of all schedulable nodes.
	PlaceCount = "count"
)

// Defaults applied by New to zero Config fields.
var (
	// DefaultThresholds are the queue limits of Tiresias: 3,250 and 7,200
	// (GPU-seconds for tiresias-l and tiresias-g, seconds for dlas), so
	// three queues.
	DefaultThresholds = []float64{3250, 7200}
)

const (
	// DefaultGittinsQuantum is the service quantum, in GPU-seconds, of
	// tiresias-g's Gittins index: the Tiresias simulator's step.
	DefaultGittinsQuantum = 3250.0
	// DefaultLocalityWaitS is how long a consolidated job waits before
	// each relaxation of its locality (one more node allowed).
	DefaultLocalityWaitS = 300.0
	// DefaultSkewThreshold is the tensor-size skew (largest tensor's share
	// of the parameters) from which a model's GPUs are consolidated.
	DefaultSkewThreshold = 0.25
)

// Config selects a policy and its knobs. The zero value of every field
// but Policy means its default.
type Config struct {
	// Policy names the ordering rule; see Policies.
	Policy string

	// Thresholds are the queue limits of dlas, tiresias-l and tiresias-g:
	// a job leaves queue i once its service reaches Thresholds[i], so
	// there are len(Thresholds)+1 queues. Service is GPU-seconds for
	// tiresias-l and tiresias-g, seconds for dlas. They must increase.
	// Nil means DefaultThresholds.
	Thresholds []float64
	// PromoteKnob turns on starvation promotion (PROMOTEKNOB in Tiresias):
	// a waiting job below queue 0 whose wait since its cycle began exceeds
	// PromoteKnob x its run time in that cycle moves to queue 0. Zero: off.
	PromoteKnob float64
	// GittinsQuantum is tiresias-g's service quantum in GPU-seconds; zero
	// means DefaultGittinsQuantum.
	GittinsQuantum float64
	// GPUTimeSamples are completed jobs' GPU-times (GPU-seconds) that
	// tiresias-g adds to the built-in prior. A snapshot's GPUTimeDist, if
	// set, replaces the result for its pass.
	GPUTimeSamples []float64

	// Placement is PlaceNodes (the default, also "") or PlaceCount.
	Placement string
	// LocalityWaitS is how long a consolidated job waits before its
	// locality relaxes by one node, and again after each further
	// LocalityWaitS (Philly). Zero means DefaultLocalityWaitS; negative
	// means never relax.
	LocalityWaitS float64
	// SkewThreshold is the skew from which a job is consolidated; zero
	// means DefaultSkewThreshold. Jobs of unknown skew are consolidated.
	SkewThreshold float64

	// MinRuntimeS is how long a borrowed job runs (since it last started)
	// before a team under its guarantee may reclaim its GPUs; zero means
	// DefaultMinRuntimeS (10 minutes), negative means no minimum. Only
	// read under fair share (Snapshot.Teams).
	MinRuntimeS float64

	// Rule picks, for a policy with a choice of rules (tiresias-l,
	// tiresias-g; see PolicyRules and docs/scheduling.md), the rule by
	// name; "" is the policy's default. A policy without a choice accepts
	// only "".
	Rule string
	// Reference picks, for a policy with a choice of rules, the rule of
	// the Tiresias authors' simulator (RuleReference), so that fidelity
	// to its figures stays provable (docs/simulator.md, "Fidelity"). The
	// other policies follow it already and ignore Reference.
	Reference bool

	// LimitsAsHints lets srtf and srsf rank a job whose duration is
	// unknown by its declared time limit less the time it has run
	// (Job.TimeLimitS): an upper bound on the work it has left (see
	// policy_srtf.go). Jobs with neither still rank last.
	LimitsAsHints bool

	// NoPreemption keeps every running job running, whatever the policy;
	// under fair share it also turns off reclaiming.
	NoPreemption bool
	// OmitWaits skips building Waits (the explanations), which the trace
	// simulator never shows; a pass is then cheaper.
	OmitWaits bool

	// CPUAlloc is how CPUs and host memory are divided among the jobs of
	// a node (Decisions.Allocations): AllocProportional (the default, also
	// "") or AllocSynergy.
	CPUAlloc string
	// OmitAllocations skips building Decisions.Allocations, which the
	// trace simulator never reads (it models CPUs itself, from the jobs'
	// placements); the other decisions are the same.
	OmitAllocations bool
	// OmitReasons leaves the reasons of Decisions.Preempts and
	// Decisions.QueueChanges empty, which the trace simulator never
	// reads; the decisions are the same. Building them was a tenth of a
	// replay's allocations.
	OmitReasons bool
	// ReuseDecisions lets a pass build its Decisions' Starts, Preempts
	// and QueueChanges in the slices of the last pass's, which the
	// caller must be done with before it calls Schedule again (the trace
	// simulator applies them at once). The placements (Start.GPUs) and
	// the rest are new each pass; the decisions are the same. A replay
	// otherwise allocates a few slices a pass, a sixth of what it
	// allocates, and every page of it is faulted in once.
	ReuseDecisions bool
	// StablePlacements promises that the caller never writes the
	// elements of a Job.Placement once it has given it in a snapshot (a
	// job that starts again gets a new slice). A pass in nodes placement
	// may then take a running job whose Placement is the very slice
	// (address and length) it saw under the same ID in an earlier pass
	// to hold the same GPUs, keep the GPUs running jobs hold from pass to
	// pass and apply only what changed (jobs started, ended, preempted)
	// instead of reading every placement again (occupy.go). The
	// decisions are the same. The trace simulator sets it: its
	// placements are the scheduler's own, never written.
	StablePlacements bool

	// SharePlacement is where a sharing job goes (share.go):
	// ShareFreeFirst (the default, also "") or ShareFullestFirst.
	SharePlacement string

	// ReserveAfterS is how long, in seconds, a pending job waits (its age
	// less its run time) before the pass reserves GPUs for it when it
	// cannot start: the GPUs that can be freed earliest, which later jobs
	// may use only if they end before the reservation's start or, under
	// a preemptive policy without fair share, give them back then
	// (reserve.go, docs/scheduling.md "Reservations"). Zero: no
	// reservations, unless a team sets its own bound
	// (Team.ReserveAfterS). fifo never reserves: its first waiting job
	// blocks the line anyway.
	ReserveAfterS float64
	// ReserveLeadS makes a job's bound the time by which it must start
	// rather than the time it is reserved (docs/scheduling.md,
	// "Reservations", rule 7): with a lead, a job is due for a
	// reservation once it has waited its bound less the lead (at once
	// when the lead is the bound or more), so that the GPUs it needs
	// drain toward it before the bound, and its deadline (when it takes
	// its GPUs from any batch job it may preempt, sharing ones too) is
	// the bound itself. Zero: due at the bound, the deadline at twice
	// the bound. The lead is the expected time to drain its GPUs: about
	// how long the jobs that hold them run on. LeadHalfBound (negative):
	// half of each job's own bound.
	ReserveLeadS float64
	// MaxReservations is how many jobs hold a reservation at once, the
	// first ones in priority order; zero means DefaultMaxReservations.
	MaxReservations int
	// HandoverS is how long, in seconds, a preempted job is expected to
	// keep its GPUs (checkpoint and exit) before they are free: a
	// reservation past its deadline takes its GPUs this long before the
	// deadline, so that its job starts by it (reserve.go, overdue). Zero:
	// at the deadline.
	HandoverS float64
}

// PolicyInfo describes a policy for people: the portal lists these.
type PolicyInfo struct {
	Name    string
	Summary string
	Source  string
	// Preemptive policies may stop running jobs for higher-priority ones.
	Preemptive bool
	// NeedsDurations policies read Job.DurationS; jobs without one rank
	// after every job that has one.
	NeedsDurations bool
}

// Policies lists the policy names Config accepts.
func Policies() []string {
	out := make([]string, len(policies))
	for i, p := range policies {
		out[i] = p.info.Name
	}
	return out
}

// PolicyInfos describes every policy, in the order of Policies.
func PolicyInfos() []PolicyInfo {
	out := make([]PolicyInfo, len(policies))
	for i, p := range policies {
		out[i] = p.info
	}
	return out
}

// Scheduler runs scheduling passes under one configuration. No decision
// depends on an earlier pass: everything a pass needs is in its Snapshot
// (the Scheduler only keeps working memory to reuse). It is safe for
// concurrent use.
type Scheduler struct {
	cfg   Config
	pol   *policy
	thr   []float64
	lim   []float64 // thr less thresholdSlack
	delta float64
	dist  *GPUTimeDist
	// minRun is the minimum runtime before a reclaim, seconds.
	minRun float64

	// Working memory: own serves one pass at a time and survives garbage
	// collections; concurrent passes borrow from pool.
	mu   sync.Mutex
	own  *pass
	pool sync.Pool
}

// New checks cfg and returns a Scheduler for it.
func New(cfg Config) (*Scheduler, error) {
	pol := policyByName(cfg.Policy)
	if pol == nil {
		return nil, fmt.Errorf("unknown policy %q (known: %v)", cfg.Policy, Policies())
	}
	rule := cfg.Rule
	if cfg.Reference && pol.rule != "" {
		if rule != "" && rule != RuleReference {
			return nil, fmt.Errorf("rule %q and the reference rule both asked for %s", rule, cfg.Policy)
		}
		rule = RuleReference
	}
	if p := pol.withRule(rule); p != nil {
		pol = p
	} else if names := pol.ruleNames(); names == nil {
		return nil, fmt.Errorf("policy %s has one rule; rule %q does not apply", cfg.Policy, rule)
	} else {
		return nil, fmt.Errorf("unknown rule %q for %s (known: %s)", rule, cfg.Policy, strings.Join(names, ", "))
	}
	sc := &Scheduler{cfg: cfg, pol: pol}
	sc.thr = cfg.Thresholds
	if sc.thr == nil {
		sc.thr = DefaultThresholds
	}
	for i, t := range sc.thr {
		if !(t > 0) || math.IsInf(t, 1) {
			return nil, fmt.Errorf("queue threshold %d is %v: must be positive and finite", i, t)
		}
		if i > 0 && t <= sc.thr[i-1] {
			return nil, fmt.Errorf("queue thresholds %v must increase", sc.thr)
		}
	}
	sc.thr = append([]float64(nil), sc.thr...)
	sc.cfg.Thresholds = sc.thr
	for _, t := range sc.thr {
		sc.lim = append(sc.lim, t*(1-thresholdSlack))
	}
	if !(cfg.PromoteKnob >= 0) || math.IsInf(cfg.PromoteKnob, 1) {
		return nil, fmt.Errorf("promote knob %v: must be zero (off) or positive", cfg.PromoteKnob)
	}
	sc.delta = cfg.GittinsQuantum
	if sc.delta == 0 {
		sc.delta = DefaultGittinsQuantum
	}
	if !(sc.delta > 0) || math.IsInf(sc.delta, 1) {
		return nil, fmt.Errorf("gittins quantum %v: must be positive", cfg.GittinsQuantum)
	}
	for _, v := range cfg.GPUTimeSamples {
		if !(v >= 0) || math.IsInf(v, 1) {
			return nil, fmt.Errorf("GPU-time sample %v: must be zero or positive", v)
		}
	}
	if pol.gittins {
		sc.dist = PriorGPUTimeDist()
		if len(cfg.GPUTimeSamples) > 0 {
			sc.dist = sc.dist.With(cfg.GPUTimeSamples...)
		}
	}
	switch cfg.Placement {
	case "":
		sc.cfg.Placement = PlaceNodes
	case PlaceNodes, PlaceCount:
	default:
		return nil, fmt.Errorf("unknown placement %q (known: %s, %s)", cfg.Placement, PlaceNodes, PlaceCount)
	}
	if math.IsNaN(cfg.LocalityWaitS) {
		return nil, fmt.Errorf("locality wait is NaN")
	}
	if cfg.LocalityWaitS == 0 {
		sc.cfg.LocalityWaitS = DefaultLocalityWaitS
	}
	if cfg.SkewThreshold == 0 {
		sc.cfg.SkewThreshold = DefaultSkewThreshold
	}
	switch m := cfg.MinRuntimeS; {
	case math.IsNaN(m) || math.IsInf(m, 0):
		return nil, fmt.Errorf("minimum runtime %v s: must be a finite number of seconds", m)
	case m == 0:
		sc.cfg.MinRuntimeS = DefaultMinRuntimeS
		sc.minRun = DefaultMinRuntimeS
	case m > 0:
		sc.minRun = m
	}
	mode, err := checkCPUAlloc(cfg.CPUAlloc)
	if err != nil {
		return nil, err
	}
	sc.cfg.CPUAlloc = mode
	if sc.cfg.SharePlacement, err = checkSharePlacement(cfg.SharePlacement); err != nil {
		return nil, err
	}
	if r := cfg.ReserveAfterS; !(r >= 0) || math.IsInf(r, 1) {
		return nil, fmt.Errorf("reserve-after %v s: must be a finite number of seconds, 0 (off) or more", r)
	}
	if l := cfg.ReserveLeadS; l != LeadHalfBound && (!(l >= 0) || math.IsInf(l, 1)) {
		return nil, fmt.Errorf("reserve lead %v s: must be a finite number of seconds, 0 or more, or LeadHalfBound", l)
	}
	if h := cfg.HandoverS; !(h >= 0) || math.IsInf(h, 1) {
		return nil, fmt.Errorf("handover %v s: must be a finite number of seconds, 0 or more", h)
	}
	switch m := cfg.MaxReservations; {
	case m == 0:
		sc.cfg.MaxReservations = DefaultMaxReservations
	case m < 0 || m > maxReservations:
		return nil, fmt.Errorf("max reservations %d: must be 1 to %d, or 0 for the default (%d)", m, maxReservations, DefaultMaxReservations)
	}
	if !(sc.cfg.SkewThreshold > 0 && sc.cfg.SkewThreshold <= 1) {
		return nil, fmt.Errorf("skew threshold %v: must be in (0, 1]", cfg.SkewThreshold)
	}
	return sc, nil
}

// Config returns the configuration with defaults filled in.
func (sc *Scheduler) Config() Config {
	c := sc.cfg
	c.Thresholds = append([]float64(nil), sc.thr...)
	c.GittinsQuantum = sc.delta
	c.Rule = sc.pol.rule
	c.GPUTimeSamples = append([]float64(nil), c.GPUTimeSamples...)
	return c
}

// Rule names the rule the policy follows where it has a choice
// (PolicyRules, docs/scheduling.md); "" for the policies with one rule.
func (sc *Scheduler) Rule() string { return sc.pol.rule }

// Queues is the number of priority queues: 1 for the policies without.
func (sc *Scheduler) Queues() int {
	if sc.pol.queues != nil {
		return len(sc.thr) + 1
	}
	return 1
}

// Schedule runs one pass over s.
func (sc *Scheduler) Schedule(s Snapshot) Decisions {
	if sc.mu.TryLock() {
		defer sc.mu.Unlock()
		if sc.own == nil {
			sc.own = new(pass)
		}
		sc.own.snap = s
		d := sc.own.run(sc, &sc.own.snap)
		sc.own.release()
		return d
	}
	p, _ := sc.pool.Get().(*pass)
	if p == nil {
		p = new(pass)
	}
	p.snap = s
	d := p.run(sc, &p.snap)
	p.release()
	sc.pool.Put(p)
	return d
}
