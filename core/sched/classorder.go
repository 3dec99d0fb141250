package sched

import "slices"

// The order of classes within a team (docs/scheduling.md, "Job classes";
// docs/portal.md, "Interactive priority"): within each team and priority
// queue, the pass hands the slots that the policy's order gives the
// team's pending jobs first to its interactive sessions (Job.Interactive)
// as long as the team's running interactive jobs and the sessions moved
// ahead before need no more GPUs than the team allows
// (Team.InteractiveGPUs), then to its high-priority jobs, then to its
// normal batch jobs and other sessions, and last to its low-priority
// jobs (Class.band); within each, the policy's order holds. As with fair
// share inside a team (usershare.go), the team's place in the walk, and
// so every other team's, is unchanged: a team only reorders its own jobs.

// classOrder reorders each team's pending jobs of each queue by class,
// and records which job a job moved down is now behind (behindClass).
func (p *pass) classOrder() {
	clear(p.behindClass)
	jobs := p.s.Jobs
	// Most passes wait only batch jobs of the normal band, whom no rule
	// moves: then there is nothing to build.
	some := false
	for k := range p.ents {
		if j := &jobs[p.ents[k].job]; j.Class.band() != 1 || j.Interactive {
			some = true
			break
		}
	}
	if !some {
		return
	}
	budget := map[string]int{}
	for i := range p.s.Teams {
		if t := &p.s.Teams[i]; t.InteractiveGPUs > 0 {
			budget[t.Name] = t.InteractiveGPUs
		}
	}
	// Only the teams whose waiting jobs some rule moves take part.
	moves := map[string]bool{}
	for k := range p.ents {
		j := &jobs[p.ents[k].job]
		if j.Class.band() != 1 || j.Interactive && budget[j.Team] > 0 {
			moves[j.Team] = true
		}
	}
	if len(moves) == 0 {
		return
	}
	// What the teams' running sessions already hold with priority.
	for i := range jobs {
		j := &jobs[i]
		if j.holds() && j.Interactive {
			if _, ok := budget[j.Team]; ok {
				budget[j.Team] -= jobGPUs(j)
			}
		}
	}
	type group struct {
		team  string
		queue int32
	}
	groups := map[group][]int32{}
	var order []group
	for k := range p.ents {
		j := &jobs[p.ents[k].job]
		if !moves[j.Team] {
			continue
		}
		g := group{j.Team, p.ents[k].queue}
		if groups[g] == nil {
			order = append(order, g)
		}
		groups[g] = append(groups[g], int32(k))
	}
	// Queues in order, so that a team's budget goes to its sessions in
	// the highest queues first.
	slices.SortFunc(order, func(a, b group) int {
		if a.queue != b.queue {
			return int(a.queue - b.queue)
		}
		if a.team < b.team {
			return -1
		}
		if a.team > b.team {
			return 1
		}
		return 0
	})
	var bands []int8
	var want []int32
	for _, g := range order {
		idx := groups[g]
		if len(idx) < 2 {
			continue
		}
		slices.SortFunc(idx, func(a, b int32) int { return compareKeys(&p.ents[a], &p.ents[b]) })
		bands = bands[:0]
		for _, k := range idx {
			j := &jobs[p.ents[k].job]
			b := j.Class.band()
			if left, has := budget[g.team]; j.Interactive && has && jobGPUs(j) <= left {
				budget[g.team] -= jobGPUs(j)
				b = -1
			}
			bands = append(bands, b)
		}
		want = want[:0]
		for b := int8(-1); b <= 2; b++ {
			for i, k := range idx {
				if bands[i] == b {
					want = append(want, k)
				}
			}
		}
		if slices.Equal(want, idx) {
			continue
		}
		p.reorder(idx, want, bands)
	}
}

// reorder gives entries want the slots of entries idx (the same entries,
// idx in the order they hold their slots, bands[i] the band of idx[i]),
// in want's order, and records for each entry moved down the first entry
// of a better band that moved up: the one it is now behind.
func (p *pass) reorder(idx, want []int32, bands []int8) {
	type keys struct{ k0, k1, k2, k3 float64 }
	slots := make([]keys, len(idx))
	pos := make(map[int32]int, len(idx))
	band := make(map[int32]int8, len(idx))
	for s, k := range idx {
		e := &p.ents[k]
		slots[s] = keys{e.k0, e.k1, e.k2, e.k3}
		pos[k] = s
		band[k] = bands[s]
	}
	if p.behindClass == nil {
		p.behindClass = map[int32]int32{}
	}
	up := [4]int32{-1, -1, -1, -1} // per band + 1: the first entry moved up
	for s, k := range want {
		if s < pos[k] && up[band[k]+1] < 0 {
			up[band[k]+1] = k
		}
	}
	for s, k := range want {
		e := &p.ents[k]
		e.k0, e.k1, e.k2, e.k3 = slots[s].k0, slots[s].k1, slots[s].k2, slots[s].k3
		e.uk = int32(s)
		if s <= pos[k] {
			continue
		}
		for b := int8(-1); b < band[k]; b++ {
			if by := up[b+1]; by >= 0 {
				p.behindClass[e.job] = p.ents[by].job
				break
			}
		}
	}
}
