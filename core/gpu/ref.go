package gpu

import (
	"slices"
	"strconv"
	"strings"
)

// Ref names one GPU of the cluster: the machine it sits on and its index
// there. It is the core's one GPU type: the scheduler's placements
// (gpu.Ref), the GPU history's buckets (gpuhist), the live
// readings (telemetry) and the what-if replay's cluster (whatif) name
// GPUs by it; the store keeps it as its String, "node:index", and the
// wire types (api, the agent protocol) as a node and an index.
type Ref struct {
	Node  string
	Index int
}

// String is "node:index", as the store keeps placements and the portal
// shows them.
func (r Ref) String() string { return r.Node + ":" + strconv.Itoa(r.Index) }

// ParseRef reads a Ref's String: false when s is no "node:index" with a
// node and an index from 0.
func ParseRef(s string) (Ref, bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return Ref{}, false
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n < 0 {
		return Ref{}, false
	}
	return Ref{Node: s[:i], Index: n}, true
}

// ParsePlacement reads a placement, one "node:index" per GPU; those that
// do not parse are left out.
func ParsePlacement(p []string) []Ref {
	out := make([]Ref, 0, len(p))
	for _, s := range p {
		if r, ok := ParseRef(strings.TrimSpace(s)); ok {
			out = append(out, r)
		}
	}
	return out
}

// PlacementNodes are the machines of a placement ("node:index" per GPU),
// each once, in the placement's order: a job's first machine is its rank
// 0's.
func PlacementNodes(p []string) []string {
	var out []string
	for _, s := range p {
		r, ok := ParseRef(strings.TrimSpace(s))
		if ok && !slices.Contains(out, r.Node) {
			out = append(out, r.Node)
		}
	}
	return out
}
