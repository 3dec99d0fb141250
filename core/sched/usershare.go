package sched

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Fair share inside a team (docs/fair-share.md). The users of a team with
// jobs pending or running split its guarantee equally; a user's factor
// is 2^(-U/S) as a team's is, with U the user's share of the team's users'
// decayed usage and S = 1/n. Within each queue of a team, the pass hands
// the slots that the policy's order gives the team's pending jobs to
// those jobs again, highest user factor first and the policy's order
// among one user's jobs: the team's place in the walk, and so every other
// team's, is unchanged, and a team with one user keeps the policy's
// order exactly.

// UserShare is where a user stands within a team, for people (the team
// page).
type UserShare struct {
	User string
	// UsageGPUSeconds is the user's decayed usage within the team.
	UsageGPUSeconds float64
	// ShareGPUs is the user's equal split of the team's guarantee among
	// the users listed.
	ShareGPUs float64
	// UsageShare is the user's decayed usage over the listed users' (0
	// when none used anything).
	UsageShare float64
	// Factor is 2^(-UsageShare*n) for n users listed: 1 for a user who
	// used nothing, 0.5 for one who used exactly an equal split. Jobs of
	// users with a higher factor take the team's slots first.
	Factor float64
	// InUseGPUs is the GPUs the user's running jobs of the team hold.
	InUseGPUs int
}

// UserShares returns where each user of team t stands: the users with
// pending or running jobs of the team and those with recorded usage, by
// name.
func UserShares(t Team, jobs []Job) []UserShare {
	idx := map[string]int{}
	var out []UserShare
	add := func(u string) int {
		if i, ok := idx[u]; ok {
			return i
		}
		idx[u] = len(out)
		out = append(out, UserShare{User: u, UsageGPUSeconds: cleanUsage(t.UserUsage[u])})
		return len(out) - 1
	}
	for u := range t.UserUsage {
		add(u)
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Team != t.Name || j.State != Pending && !j.holds() {
			continue
		}
		k := add(j.User)
		if j.holds() {
			out[k].InUseGPUs += jobGPUs(j)
		}
	}
	slices.SortFunc(out, func(a, b UserShare) int { return strings.Compare(a.User, b.User) })
	sum := 0.0
	for _, u := range out {
		sum += u.UsageGPUSeconds
	}
	n := float64(len(out))
	for i := range out {
		out[i].ShareGPUs = float64(max(t.GuaranteeGPUs, 0)) / n
		out[i].Factor = 1
		if sum > 0 {
			out[i].UsageShare = out[i].UsageGPUSeconds / sum
			out[i].Factor = math.Exp2(-out[i].UsageShare * n)
		}
	}
	return out
}

// cleanUsage reads a usage as the fair-share rules do: negative or not
// finite is 0.
func cleanUsage(u float64) float64 {
	if !(u > 0) || math.IsInf(u, 1) {
		return 0
	}
	return u
}

// teamUser names a user of a team by the names in a job, to find its
// slot in userOrder.
type teamUser struct{ team, user string }

// ukeys are the policy's keys of an entry: its slot in reslot.
type ukeys struct{ k0, k1, k2, k3 float64 }

// uslot is one user of a listed team with jobs pending or running, in
// the order userOrder first met them (the order userFactors sums in).
type uslot struct {
	team int32
	user string
	f    float64 // its factor within the team
	rank int32   // its place among the team's distinct factors, highest first
}

// userOrder reorders each listed team's pending jobs among the team's
// slots by their users' factors (fair share inside a team), and records
// which jobs a teammate's job moved ahead of (behind).
//
// It looks each job's team and user up once, by both names together
// (uslots), and groups entries by team and queue numbers: a job's names
// are hashed once a pass, not once for each table that needs them.
func (p *pass) userOrder() {
	clear(p.behind)
	multi := false
	for i := range p.s.Teams {
		if len(p.s.Teams[i].UserUsage) > 0 {
			multi = true
			break
		}
	}
	if !multi {
		return // nobody has used anything: every factor is 1
	}
	jobs := p.s.Jobs
	// Users with jobs pending or running, per team, in the order of the
	// jobs.
	if p.uslotOf == nil {
		p.uslotOf = map[teamUser]int32{}
	}
	clear(p.uslotOf)
	p.uslots = p.uslots[:0]
	nt := len(p.fs.t)
	p.uteam = resize(p.uteam, nt)
	for t := range p.uteam {
		p.uteam[t] = p.uteam[t][:0]
	}
	p.ujslot = resize(p.ujslot, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		p.ujslot[i] = -1
		if j.State != Pending && !j.holds() {
			continue
		}
		k := teamUser{j.Team, j.User}
		s, ok := p.uslotOf[k]
		if !ok {
			s = -1
			if t, ok := p.fs.byName[j.Team]; ok && int(t) < p.fs.listed {
				s = int32(len(p.uslots))
				p.uslots = append(p.uslots, uslot{team: t, user: j.User})
				p.uteam[t] = append(p.uteam[t], s)
			}
			p.uslotOf[k] = s
		}
		p.ujslot[i] = s
	}
	// The entries of each team with two users or more, by team and queue.
	if p.ugroupOf == nil {
		p.ugroupOf = map[uint64]int32{}
	}
	clear(p.ugroupOf)
	for g := range p.ugroups {
		p.ugroups[g].idx = p.ugroups[g].idx[:0]
	}
	p.ugroups = p.ugroups[:0]
	for k := range p.ents {
		t := p.entryTeam(p.ents[k].job)
		if t < 0 || len(p.uteam[t]) < 2 {
			continue
		}
		key := uint64(uint32(t))<<32 | uint64(uint32(p.ents[k].queue))
		g, ok := p.ugroupOf[key]
		if !ok {
			g = int32(len(p.ugroups))
			p.ugroupOf[key] = g
			if len(p.ugroups) < cap(p.ugroups) {
				p.ugroups = p.ugroups[:g+1]
				p.ugroups[g].team = t
			} else {
				p.ugroups = append(p.ugroups, ugroup{team: t})
			}
		}
		p.ugroups[g].idx = append(p.ugroups[g].idx, int32(k))
	}
	for i := range p.s.Teams {
		tm := &p.s.Teams[i]
		t, ok := p.fs.byName[tm.Name]
		if !ok || len(p.uteam[t]) < 2 {
			continue
		}
		p.userFactors(tm, p.uteam[t])
		for g := range p.ugroups {
			if p.ugroups[g].team == t && len(p.ugroups[g].idx) >= 2 {
				p.reslot(p.ugroups[g].idx, t)
			}
		}
	}
}

// entryTeam returns the listed team of job i for userOrder, or -1.
func (p *pass) entryTeam(i int32) int32 {
	if s := p.ujslot[i]; s >= 0 {
		return p.uslots[s].team
	}
	if t, ok := p.fs.byName[p.s.Jobs[i].Team]; ok && int(t) < p.fs.listed {
		return t
	}
	return -1
}

// userFactors sets the factor and rank of each of users (slots of one
// team, in the order met) from team t's usage, as userFactors does.
func (p *pass) userFactors(t *Team, users []int32) {
	sum := 0.0
	for _, s := range users {
		sum += cleanUsage(t.UserUsage[p.uslots[s].user])
	}
	n := float64(len(users))
	p.ufs = p.ufs[:0]
	for _, s := range users {
		u := &p.uslots[s]
		u.f = 1
		if sum > 0 {
			u.f = math.Exp2(-cleanUsage(t.UserUsage[u.user]) / sum * n)
		}
		p.ufs = append(p.ufs, u.f)
	}
	// The distinct factors, highest first, and each user's place among
	// them (reslot's stable sort by factor, done by counting). A job
	// whose user has no slot (not pending or running) has factor 0.
	p.ufs = append(p.ufs, 0)
	slices.SortFunc(p.ufs, func(a, b float64) int { return cmp.Compare(b, a) })
	p.ufs = slices.Compact(p.ufs)
	for _, s := range users {
		u := &p.uslots[s]
		r, _ := slices.BinarySearchFunc(p.ufs, u.f, func(e, f float64) int { return cmp.Compare(f, e) })
		u.rank = int32(r)
	}
}

// userOf returns the slot of the user of job i within team t's users, or
// -1 when the user has no job of the team pending or running.
func (p *pass) userOf(i int32, t int32) int32 {
	if s := p.ujslot[i]; s >= 0 {
		return s
	}
	j := &p.s.Jobs[i]
	if s, ok := p.uslotOf[teamUser{j.Team, j.User}]; ok && s >= 0 && p.uslots[s].team == t {
		return s
	}
	return -1
}

// reslot hands the slots of entries idx (one team's pending jobs in one
// queue) to them again, highest user factor first (the factors userFactors
// set last for team t).
func (p *pass) reslot(idx []int32, t int32) {
	jobs := p.s.Jobs
	slices.SortFunc(idx, func(a, b int32) int { return compareKeys(&p.ents[a], &p.ents[b]) })
	// want is idx stably sorted by factor, highest first: by counting the
	// entries of each factor's rank.
	nr := len(p.ufs)
	p.urank = resize(p.urank, nr+1)
	clear(p.urank)
	p.ukrank = resize(p.ukrank, len(idx))
	for s, k := range idx {
		r := int32(nr - 1) // factor 0
		if u := p.userOf(p.ents[k].job, t); u >= 0 {
			r = p.uslots[u].rank
		}
		p.ukrank[s] = r
		p.urank[r+1]++
	}
	for r := 1; r <= nr; r++ {
		p.urank[r] += p.urank[r-1]
	}
	want := resize(p.uwant, len(idx))
	p.uwant = want
	moved := false
	for s, k := range idx {
		r := p.ukrank[s]
		w := p.urank[r]
		p.urank[r]++
		want[w] = k
		moved = moved || int(w) != s
	}
	if !moved {
		return
	}
	slots := resize(p.ukeys, len(idx))
	p.ukeys = slots
	for s, k := range idx {
		e := &p.ents[k]
		slots[s] = ukeys{e.k0, e.k1, e.k2, e.k3}
	}
	if p.behind == nil {
		p.behind = map[int32]int32{}
	}
	// Each entry's slot before.
	p.upos = resize(p.upos, len(p.ents))
	for s, k := range idx {
		p.upos[k] = int32(s)
	}
	// The first two jobs, of different users, that moved up: a job moved
	// down is behind the first of them that is not its user's.
	up := [2]int32{-1, -1}
	for s, k := range want {
		e := &p.ents[k]
		e.k0, e.k1, e.k2, e.k3 = slots[s].k0, slots[s].k1, slots[s].k2, slots[s].k3
		e.uk = int32(s)
		user := jobs[e.job].User
		if from := int(p.upos[k]); s > from {
			for _, u := range up {
				if u >= 0 && jobs[u].User != user {
					p.behind[e.job] = u
					break
				}
			}
		} else if s < from {
			switch {
			case up[0] < 0:
				up[0] = e.job
			case up[1] < 0 && jobs[up[0]].User != user:
				up[1] = e.job
			}
		}
	}
}

// appendBehind appends why job e sits lower in its team's order than the
// policy alone would place it, if it does.
func (p *pass) appendBehind(b []byte, e *entry) []byte {
	if by, ok := p.behindClass[e.job]; ok {
		s := &p.s.Jobs[by]
		b = append(b, "; behind "...)
		if s.User != "" {
			b = appendName(b, s.User)
			b = append(b, "'s "...)
		}
		switch {
		case p.s.Jobs[e.job].Class == ClassLow:
			b = append(b, "job "...)
			b = strconv.AppendInt(b, s.ID, 10)
			b = append(b, ": a low-priority job waits behind its team's other jobs"...)
		case s.Interactive:
			b = append(b, "interactive session "...)
			b = strconv.AppendInt(b, s.ID, 10)
			b = append(b, " (team "...)
			b = appendName(b, s.Team)
			b = append(b, " gives its sessions priority)"...)
		default:
			b = append(b, "high-priority job "...)
			b = strconv.AppendInt(b, s.ID, 10)
			if s.Team != "" {
				b = append(b, " (team "...)
				b = appendName(b, s.Team)
				b = append(b, ")"...)
			}
		}
	}
	by, ok := p.behind[e.job]
	if !ok {
		return b
	}
	mate := &p.s.Jobs[by]
	b = append(b, "; behind teammate "...)
	b = appendName(b, mate.User)
	b = append(b, "'s job "...)
	b = strconv.AppendInt(b, mate.ID, 10)
	b = append(b, ", whose user has used less of team "...)
	b = appendName(b, mate.Team)
	b = append(b, "'s guarantee (fair share inside a team)"...)
	return b
}

// ugroup is the entries of one team's pending jobs in one queue
// (userOrder).
type ugroup struct {
	team int32
	idx  []int32
}
