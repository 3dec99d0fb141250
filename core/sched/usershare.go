package sched

import (
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
		if j.Team != t.Name || j.State != Pending && j.State != Running {
			continue
		}
		k := add(j.User)
		if j.State == Running {
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

// userFactors returns the factor of each user of team t among users.
func userFactors(t *Team, users []string) map[string]float64 {
	sum := 0.0
	for _, u := range users {
		sum += cleanUsage(t.UserUsage[u])
	}
	f := make(map[string]float64, len(users))
	for _, u := range users {
		f[u] = 1
		if sum > 0 {
			f[u] = math.Exp2(-cleanUsage(t.UserUsage[u]) / sum * float64(len(users)))
		}
	}
	return f
}

// userOrder reorders each listed team's pending jobs among the team's
// slots by their users' factors (fair share inside a team), and records
// which jobs a teammate's job moved ahead of (behind).
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
	if p.ugroup == nil {
		p.ugroup = map[string][]int32{}
	}
	for k, v := range p.ugroup {
		p.ugroup[k] = v[:0]
	}
	jobs := p.s.Jobs
	// Users with jobs pending or running, per team.
	active := map[string][]string{}
	seen := map[userKey]bool{}
	for i := range jobs {
		j := &jobs[i]
		if j.State != Pending && j.State != Running {
			continue
		}
		t, ok := p.fs.byName[j.Team]
		if !ok || int(t) >= p.fs.listed {
			continue
		}
		if k := (userKey{t, j.User}); !seen[k] {
			seen[k] = true
			active[j.Team] = append(active[j.Team], j.User)
		}
	}
	for k := range p.ents {
		j := &jobs[p.ents[k].job]
		if len(active[j.Team]) < 2 {
			continue
		}
		g := j.Team + "\x00" + strconv.Itoa(int(p.ents[k].queue))
		p.ugroup[g] = append(p.ugroup[g], int32(k))
	}
	for i := range p.s.Teams {
		t := &p.s.Teams[i]
		users := active[t.Name]
		if len(users) < 2 {
			continue
		}
		f := userFactors(t, users)
		for g, idx := range p.ugroup {
			if len(idx) < 2 || !strings.HasPrefix(g, t.Name+"\x00") {
				continue
			}
			p.reslot(idx, f)
		}
	}
}

// reslot hands the slots of entries idx (one team's pending jobs in one
// queue) to them again, highest user factor first.
func (p *pass) reslot(idx []int32, f map[string]float64) {
	jobs := p.s.Jobs
	slices.SortFunc(idx, func(a, b int32) int { return compareKeys(&p.ents[a], &p.ents[b]) })
	want := slices.Clone(idx)
	// Each entry's factor, looked up once rather than in every comparison.
	if len(p.ufactor) < len(p.ents) {
		p.ufactor = make([]float64, len(p.ents))
	}
	for _, k := range idx {
		p.ufactor[k] = f[jobs[p.ents[k].job].User]
	}
	slices.SortStableFunc(want, func(a, b int32) int {
		fa, fb := p.ufactor[a], p.ufactor[b]
		switch {
		case fa > fb:
			return -1
		case fa < fb:
			return 1
		}
		return 0
	})
	if slices.Equal(idx, want) {
		return
	}
	type keys struct{ k0, k1, k2, k3 float64 }
	slots := make([]keys, len(idx))
	for s, k := range idx {
		e := &p.ents[k]
		slots[s] = keys{e.k0, e.k1, e.k2, e.k3}
	}
	if p.behind == nil {
		p.behind = map[int32]int32{}
	}
	pos := make(map[int32]int, len(idx))
	for s, k := range idx {
		pos[k] = s
	}
	// The first two jobs, of different users, that moved up: a job moved
	// down is behind the first of them that is not its user's.
	up := [2]int32{-1, -1}
	for s, k := range want {
		e := &p.ents[k]
		e.k0, e.k1, e.k2, e.k3 = slots[s].k0, slots[s].k1, slots[s].k2, slots[s].k3
		e.uk = int32(s)
		user := jobs[e.job].User
		if from := pos[k]; s > from {
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
