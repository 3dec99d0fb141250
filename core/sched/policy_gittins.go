package sched

import (
	"math"
	"strconv"
)

// tiresias-g (2D-Gittins): the queues of tiresias-l; within a queue the
// highest Gittins index of the job's attained service first (gittins.go).
// Its rules (docs/scheduling.md, "The Gittins index"):
//
//   - full-index (the default): the index best over every quantum
//     (GPUTimeDist.FullIndex); ties: running first, then queue entry.
//   - one-quantum: the index of one GittinsQuantum (GPUTimeDist.Index),
//     the rule of this core before full-index; ties the same.
//   - least-service: one-quantum, ties broken by the least attained
//     service, then as above.
//   - reference: the Tiresias simulator's tabulated index
//     (GPUTimeDist.ReferenceIndex); ties: earliest submitted first.
//   - full-body: the full index in every queue but the last, the
//     reference's tabulated index in the last; ties: earliest submitted
//     first (docs/scheduling.md, "Beating the reference").
//   - levels: the full index in every queue but the last; the last
//     split into levels of attained service, each 4 times the one
//     before (levelBits), the lowest level first and the earliest submitted
//     first within a level (docs/scheduling.md, "Beating the
//     reference").

var gittinsPolicy = &policy{
	info:     gittinsInfo,
	rule:     "full-index",
	preempts: true,
	queues:   byAttained,
	gittins:  true,
	key:      gittinsKey,
	rank:     gittinsRank,
	rules:    []*policy{gittinsQuantumPolicy, gittinsLeastServicePolicy, gittinsReferencePolicy, gittinsFullBodyPolicy, gittinsLevelsPolicy, gittinsLevelsTablePolicy},
}

var gittinsQuantumPolicy = &policy{
	info:     gittinsInfo,
	rule:     "one-quantum",
	preempts: true,
	queues:   byAttained,
	gittins:  true,
	key:      gittinsQuantumKey,
	rank:     gittinsRank,
}

var gittinsLeastServicePolicy = &policy{
	info:     gittinsInfo,
	rule:     "least-service",
	preempts: true,
	queues:   byAttained,
	gittins:  true,
	key:      gittinsLeastServiceKey,
	rank:     gittinsRank,
}

var gittinsReferencePolicy = &policy{
	info:     gittinsInfo,
	rule:     RuleReference,
	preempts: true,
	queues:   byAttained,
	gittins:  true,
	key:      gittinsReferenceKey,
	rank:     gittinsRank,
}

var gittinsFullBodyPolicy = &policy{
	info:     gittinsInfo,
	rule:     RuleFullBody,
	preempts: true,
	queues:   byAttained,
	gittins:  true,
	key:      gittinsFullBodyKey,
	rank:     gittinsRank,
}

var gittinsLevelsPolicy = &policy{
	info:     gittinsInfo,
	rule:     RuleLevels,
	preempts: true,
	queues:   byAttained,
	gittins:  true,
	key:      gittinsLevelsKey,
	rank:     gittinsLevelsRank,
}

var gittinsLevelsTablePolicy = &policy{
	info:     gittinsInfo,
	rule:     RuleLevelsTable,
	preempts: true,
	queues:   byAttained,
	gittins:  true,
	key:      levelsTableKey(levelsTableBound),
	rank:     gittinsLevelsTableRank,
}

// RuleLevels names tiresias-g's rule that orders every queue but the last
// by the full Gittins index and the last by levels of attained service,
// growing geometrically: multi-level feedback without prior knowledge of
// durations carried on past the last threshold (docs/scheduling.md,
// "Beating the reference").
const RuleLevels = "levels"

// levelBits sets how much more service each level of the last queue
// spans than the one before under RuleLevels, a factor of 2^levelBits =
// 4: level k holds the jobs of 4^k to 4^(k+1) GPU-s attained.
const levelBits = 2

// serviceLevel is the level of the last queue of a job that has attained
// a GPU-seconds under RuleLevels: floor(log4 a), 0 below 4. It is exact
// at the levels' bounds (powers of 4), which floating-point logarithms
// are not: a = f x 2^e with f in [0.5, 1), so floor(log2 a) = e - 1.
func serviceLevel(a float64) float64 {
	switch {
	case math.IsInf(a, 1):
		return math.MaxInt32
	case !(a >= 1<<levelBits):
		return 0
	}
	_, e := math.Frexp(a)
	return float64((e - 1) / levelBits)
}

// RuleFullBody names tiresias-g's rule that orders every queue but the
// last by the full Gittins index and the last as the Tiresias simulator
// does: no prior knowledge of durations, and at or below the reference's
// average pending time on every cell of the shared traces' matrix
// (docs/scheduling.md, "Beating the reference").
const RuleFullBody = "full-body"

var gittinsInfo = PolicyInfo{Name: "tiresias-g",
	Summary: "2D-Gittins: queues by attained service, Gittins index within a queue, preemptive",
	Source:  "Tiresias (NSDI'19)", Preemptive: true}

// gittinsKey is (queue, higher full Gittins index, running first,
// queue-entry time).
func gittinsKey(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
	g := p.fullIndex(p.cycleService(j, qs))
	e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), -g, run, since(j, qs)
}

// gittinsQuantumKey is gittinsKey with the index of one quantum.
func gittinsQuantumKey(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
	g := p.dist.Index(p.cycleService(j, qs), p.sc.delta)
	e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), -g, run, since(j, qs)
}

// gittinsLeastServiceKey is (queue, higher one-quantum index, less
// attained service, running first); its last key is the queue-entry time
// only where the service ties too, which compareEntries reaches through
// the job ID: the key has four places.
func gittinsLeastServiceKey(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
	a := p.cycleService(j, qs)
	g := p.dist.Index(a, p.sc.delta)
	e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), -g, a, run
}

// gittinsReferenceKey is (queue, higher tabulated index, earlier
// arrival, running first).
func gittinsReferenceKey(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
	g := p.referenceIndex(p.cycleService(j, qs))
	e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), -g, arrival(j), run
}

// gittinsFullBodyKey is (queue, higher index, earlier arrival, running
// first), where the index is the full one below the last queue, and the
// reference's tabulated one in the last queue. A job below the last
// threshold has attained less than most of the prior's samples, whose
// mass there makes the full index sharp: it orders the short jobs, which
// those queues hold, by how likely they are to finish soon. In the last
// queue the prior's few samples leave the full index a sawtooth (it
// rises as a job nears a sample and drops once past it), which preempts
// long jobs near their end; the reference's table, with the earliest
// submitted first among equals, keeps the oldest long jobs going, which
// on the traces of real clusters no other order measured beat
// (docs/scheduling.md).
func gittinsFullBodyKey(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
	a := p.cycleService(j, qs)
	var g float64
	if qs.Index < len(p.sc.thr) {
		g = p.fullIndex(a)
	} else {
		g = p.referenceIndex(a)
	}
	e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), -g, arrival(j), run
}

// gittinsLevelsKey is (queue, higher full index, earlier arrival, running
// first) below the last queue, and (queue, lower service level, earlier
// arrival, running first) in the last. Within the last queue the
// reference's table falls with attained service nearly as 1/a (the
// prior's tail is sparse), so it orders the long jobs by least attained
// service in steps as fine as the samples, and the earliest submitted
// job among those of one step runs only until its service crosses the
// next sample. Levels a factor of 4 apart serve each level first come,
// first served, as the queues above do, and the next level only when
// the lower ones are empty: the classic multi-level feedback of
// geometrically growing quanta, which needs no distribution.
func gittinsLevelsKey(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
	a := p.cycleService(j, qs)
	if qs.Index < len(p.sc.thr) {
		e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), -p.fullIndex(a), arrival(j), run
		return
	}
	e.k0, e.k1, e.k2, e.k3 = float64(qs.Index), serviceLevel(a), arrival(j), run
}

// RuleLevelsTable names tiresias-g's rule that orders every queue but
// the last by the full Gittins index, and the last by levels of attained
// service (as RuleLevels) for the jobs below levelsTableBound GPU-s and
// by the reference's table (as RuleFullBody) for those at or above it,
// after every job below (docs/scheduling.md, "Beating the reference").
const RuleLevelsTable = "levels-table"

// levelsTableBound is the attained service, in GPU-seconds, from which
// RuleLevelsTable orders the last queue by the reference's table instead
// of by levels: between 4^9 and 4^10, so the levels below it are those of
// RuleLevels up to level 9.
const levelsTableBound = 350_000

// levelsTableKey returns RuleLevelsTable's key with the bound at bound
// GPU-s: gittinsLevelsKey below it; at or above, (queue, past the
// levels, higher tabulated index, earlier arrival, running first), the
// second and third folded into one place, pastLevels(bound) less the
// tabulated index: that index is per GPU-s, below 1, so the higher index
// comes first, and every job below the bound (whose level is at most
// serviceLevel(bound)) before any at or above it.
func levelsTableKey(bound float64) func(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
	past := pastLevels(bound)
	return func(p *pass, e *entry, j *Job, qs *QueueState, run float64) {
		a := p.cycleService(j, qs)
		switch {
		case qs.Index < len(p.sc.thr):
			e.k1 = -p.fullIndex(a)
		case a < bound:
			e.k1 = serviceLevel(a)
		default:
			e.k1 = past - p.referenceIndex(a)
		}
		e.k0, e.k2, e.k3 = float64(qs.Index), arrival(j), run
	}
}

// pastLevels is the first key of RuleLevelsTable's table, before the
// index is taken off: two levels past the bound's, so that a key
// between it less 1 and it belongs to the table.
func pastLevels(bound float64) float64 {
	return serviceLevel(bound) + 2
}

// gittinsLevelsTableRank is gittinsRank below the last queue; in it,
// gittinsLevelsRank's for a job below levelsTableBound, "queue 2,
// Gittins index 8.8e-08 (the reference's table)" for one at or above.
func gittinsLevelsTableRank(p *pass, b []byte, e *entry) []byte {
	past := pastLevels(levelsTableBound)
	switch {
	case int(e.queue) < len(p.sc.thr):
		return gittinsRank(p, b, e)
	case e.k1 < past-1:
		return gittinsLevelsRank(p, b, e)
	}
	b = appendQueue(b, e)
	b = append(b, ", Gittins index "...)
	b = strconv.AppendFloat(b, past-e.k1, 'g', 3, 64)
	return append(b, " (the reference's table)"...)
}

// gittinsLevelsRank is gittinsRank below the last queue, "queue 2,
// service level 8 (4^8 GPU-s attained or more)" in it.
func gittinsLevelsRank(p *pass, b []byte, e *entry) []byte {
	if int(e.queue) < len(p.sc.thr) {
		return gittinsRank(p, b, e)
	}
	b = appendQueue(b, e)
	b = append(b, ", service level "...)
	b = strconv.AppendFloat(b, e.k1, 'f', 0, 64)
	b = append(b, " (4^"...)
	b = strconv.AppendFloat(b, e.k1, 'f', 0, 64)
	return append(b, " GPU-s attained or more)"...)
}

// gittinsRank is "queue 0, Gittins index 0.004".
func gittinsRank(_ *pass, b []byte, e *entry) []byte {
	b = appendQueue(b, e)
	b = append(b, ", Gittins index "...)
	return strconv.AppendFloat(b, -e.k1, 'g', 3, 64)
}

// fullIndex is p.dist.FullIndex(a), remembered across the passes of this
// working memory for as long as the distribution stays the same: a
// waiting job's service does not change, so most lookups repeat. The
// value depends on the distribution and a alone, never on the pass.
func (p *pass) fullIndex(a float64) float64 {
	c := &p.gcache
	if c.dist != p.dist || len(c.m) >= maxIndexCache {
		c.dist = p.dist
		if c.m == nil {
			c.m = make(map[float64]float64)
		}
		clear(c.m)
	}
	if g, ok := c.m[a]; ok {
		return g
	}
	g := p.dist.FullIndex(a)
	c.m[a] = g
	return g
}

// referenceIndex is p.dist.ReferenceIndex(a, delta) through a table built
// once per distribution and quantum.
func (p *pass) referenceIndex(a float64) float64 {
	c := &p.gcache
	if c.refDist != p.dist || c.refDelta != p.sc.delta {
		c.refDist, c.refDelta = p.dist, p.sc.delta
		c.ref = p.dist.referenceTable(p.sc.delta)
	}
	return c.ref.lookup(a)
}

// maxIndexCache bounds the remembered indices.
const maxIndexCache = 1 << 17

// indexCache remembers Gittins indices for one distribution: full
// indices by attained service, and the reference's table.
type indexCache struct {
	dist *GPUTimeDist
	m    map[float64]float64

	refDist  *GPUTimeDist
	refDelta float64
	ref      referenceTable
}
