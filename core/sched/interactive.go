package sched

import "slices"

// Interactive priority (docs/portal.md, "Interactive priority"): within
// each team and priority queue, the pass hands the first slots that the
// policy's order gives the team's pending jobs to its interactive
// sessions (Job.Interactive), in the policy's order, as long as the
// team's running interactive jobs and the sessions moved ahead before
// need no more GPUs than the team allows (Team.InteractiveGPUs); the
// others keep the policy's order behind them. As with fair share inside
// a team (usershare.go), the team's place in the walk, and so every
// other team's, is unchanged: a team only reorders its own jobs.

// interactiveOrder moves each team's interactive sessions ahead of the
// team's other pending jobs of the same queue, within the team's budget,
// and records which jobs a session moved ahead of (behindSession).
func (p *pass) interactiveOrder() {
	clear(p.behindSession)
	jobs := p.s.Jobs
	budget := map[string]int{}
	for i := range p.s.Teams {
		if t := &p.s.Teams[i]; t.InteractiveGPUs > 0 {
			budget[t.Name] = t.InteractiveGPUs
		}
	}
	if len(budget) == 0 {
		return
	}
	want := false
	for k := range p.ents {
		j := &jobs[p.ents[k].job]
		if j.Interactive && budget[j.Team] > 0 {
			want = true
			break
		}
	}
	if !want {
		return
	}
	// What the teams' running sessions already hold with priority.
	for i := range jobs {
		j := &jobs[i]
		if j.State == Running && j.Interactive {
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
		if _, ok := budget[j.Team]; !ok {
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
	for _, g := range order {
		idx := groups[g]
		if len(idx) < 2 {
			continue
		}
		slices.SortFunc(idx, func(a, b int32) int { return compareKeys(&p.ents[a], &p.ents[b]) })
		var ahead, rest []int32
		for _, k := range idx {
			j := &jobs[p.ents[k].job]
			if n := jobGPUs(j); j.Interactive && n <= budget[g.team] {
				budget[g.team] -= n
				ahead = append(ahead, k)
				continue
			}
			rest = append(rest, k)
		}
		if len(ahead) == 0 || len(rest) == 0 {
			continue
		}
		p.reorder(idx, append(ahead, rest...), ahead[0])
	}
}

// reorder gives entries want the slots of entries idx (the same entries,
// idx in the order they hold their slots), in want's order, and records
// that each entry moved down is behind first, the first session moved
// up.
func (p *pass) reorder(idx, want []int32, first int32) {
	type keys struct{ k0, k1, k2, k3 float64 }
	slots := make([]keys, len(idx))
	pos := make(map[int32]int, len(idx))
	for s, k := range idx {
		e := &p.ents[k]
		slots[s] = keys{e.k0, e.k1, e.k2, e.k3}
		pos[k] = s
	}
	if p.behindSession == nil {
		p.behindSession = map[int32]int32{}
	}
	for s, k := range want {
		e := &p.ents[k]
		e.k0, e.k1, e.k2, e.k3 = slots[s].k0, slots[s].k1, slots[s].k2, slots[s].k3
		e.uk = int32(s)
		if s > pos[k] {
			p.behindSession[e.job] = p.ents[first].job
		}
	}
}
