package sched

import "strconv"

// tiresias-g (2D-Gittins): the queues of tiresias-l; within a queue the
// highest Gittins index of the job's attained service first (gittins.go).
// Ties: running first, then queue-entry order.
//
// Its rule (docs/scheduling.md, "The Gittins index"): full-index, the
// index best over every quantum (GPUTimeDist.FullIndex). Under
// Config.Reference, one-quantum, the index of one GittinsQuantum
// (GPUTimeDist.Index), whose figures are traced to the Tiresias
// simulator's.

var gittinsPolicy = &policy{
	info:      gittinsInfo,
	rule:      "full-index",
	preempts:  true,
	queues:    byAttained,
	gittins:   true,
	key:       gittinsKey,
	rank:      gittinsRank,
	reference: gittinsQuantumPolicy,
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

var gittinsInfo = PolicyInfo{Name: "tiresias-g",
	Summary: "2D-Gittins: queues by attained service, Gittins index within a queue, preemptive",
	Source:  "Tiresias (NSDI'19)", Preemptive: true}

// gittinsKey is (queue, higher full Gittins index, running first,
// queue-entry time).
func gittinsKey(p *pass, j *Job, qs *QueueState, run float64) keys {
	g := p.fullIndex(p.cycleService(j, qs))
	return keys{float64(qs.Index), -g, run, since(j, qs)}
}

// gittinsQuantumKey is gittinsKey with the index of one quantum.
func gittinsQuantumKey(p *pass, j *Job, qs *QueueState, run float64) keys {
	g := p.dist.Index(p.cycleService(j, qs), p.sc.delta)
	return keys{float64(qs.Index), -g, run, since(j, qs)}
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

// maxIndexCache bounds the remembered indices.
const maxIndexCache = 1 << 17

// indexCache remembers full Gittins indices by attained service for one
// distribution.
type indexCache struct {
	dist *GPUTimeDist
	m    map[float64]float64
}
