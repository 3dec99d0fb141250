package enginestore

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/models"
)

// The engine reads the unfinished jobs every pass. At a long queue a
// whole read is most of a pass, and between two passes few jobs change:
// the view keeps the jobs of the last read, and a pass reads only the
// rows changed since (by jobs.updated_at, indexed), with a whole read
// every fullReadEvery all the same.
//
// Every change of a job row sets its updated_at, whichever replica makes
// it (submits, cancels and holds come through the store from any of
// them); the wait reasons the engine writes leave it, since the engine
// does not read them. A change is read again for changeOverlap after it:
// enough for a transaction that commits after the read that followed its
// write, and for the replicas' clocks to differ by that much. The whole
// read every fullReadEvery bounds what anything else could cost. It is
// rare because it is a slow pass at a long queue (about a second at
// 10,000 queued on the development VM), which the job ends that arrive
// meanwhile wait for. Of the rows in the window read again, a pass reads
// whole only those whose stamp (updated_at) is not the one of the row as
// the view applied it (models.Store.JobStampsSince, then JobsByID): two
// changes of a row within the stamp's resolution (a microsecond on
// PostgreSQL) by clocks that agree to it would read as one, until the
// next whole read.

const (
	fullReadEvery = 5 * time.Minute
	changeOverlap = 5 * time.Second
)

// jobView is the unfinished jobs the engine acts on, as last read. It
// keeps them in the order of their IDs, which the engine takes them in,
// and merges the rows changed since the last read into that order (a
// read returns them by ID too), so that a pass copies the jobs it is
// given instead of sorting them again.
type jobView struct {
	mu     sync.Mutex
	jobs   []engine.Job // by ID; with Account, without dependencies' states
	readAt time.Time    // when the last read began; zero: none yet
	fullAt time.Time    // when the last whole read began
	// applied is the stamp (jobs.updated_at) of each row the view
	// applied since the window of changes read again began.
	applied map[int64]time.Time
	// users counts the jobs of each owner in jobs; accounts is the Unix
	// account of each (UnixAccounts) as last read, which the jobs carry:
	// a pass sets the accounts of every job again only when they change,
	// instead of looking each job's owner up.
	users    map[string]int
	accounts map[string]string
	// names holds one copy of each team and owner name of the jobs
	// applied since the last whole read, which the jobs carry
	// (jobView.name): the pass reads every job's team, owner and state,
	// and at a long queue reading 10,000 copies of the same few names,
	// each its own allocation, missed the processor's caches. Rebuilt by
	// each whole read.
	names map[string]string
	// given is the copy of jobs the last read gave the engine, whose
	// array the next read copies into: the engine's pass is over by then
	// (engine.Store), and at a long queue a new array every pass is
	// megabytes allocated, zeroed and scanned by the collector.
	given []engine.Job
}

// unfinished returns the jobs the engine acts on (models.Store.JobsToSchedule),
// by ID, as engine jobs with their owners' accounts and without their
// dependencies' states, which UnfinishedEngineJobs adds.
func (s Store) unfinished(ctx context.Context) ([]engine.Job, error) {
	v := s.view
	if v == nil {
		out, err := s.readAll(ctx)
		if err != nil {
			return nil, err
		}
		return out, s.setAccounts(ctx, out)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	began := time.Now()
	if v.readAt.IsZero() || began.Sub(v.fullAt) >= fullReadEvery || began.Before(v.readAt) {
		out, stamps, err := s.readWhole(ctx)
		if err != nil {
			return nil, err
		}
		v.jobs, v.readAt, v.fullAt = out, began, began
		// The rows read are applied as they are: of those in the window
		// the next read reads again, it reads whole only the ones whose
		// stamp moved since, not every row changed in the last
		// changeOverlap (after a burst of submissions, thousands).
		clear(v.applied)
		if v.applied == nil {
			v.applied = make(map[int64]time.Time)
		}
		from := began.Add(-changeOverlap)
		for i, at := range stamps {
			if !at.Before(from) {
				v.applied[out[i].ID] = at
			}
		}
		v.users, v.accounts, v.names = make(map[string]int), nil, make(map[string]string)
		for i := range out {
			v.intern(&out[i])
			v.users[out[i].User]++
		}
		if err := s.viewAccounts(ctx, true); err != nil {
			return nil, err
		}
		return v.give(), nil
	}
	changed, err := s.changedSince(ctx, v.readAt.Add(-changeOverlap))
	if err != nil {
		return nil, err
	}
	v.jobs = s.merge(v.jobs, changed)
	v.readAt = began
	if err := s.viewAccounts(ctx, false); err != nil {
		return nil, err
	}
	return v.give(), nil
}

// give returns a copy of the view's jobs for the engine, in the array of
// the copy it gave last (given), without the jobs that left (merge). Once
// a quarter of the view's jobs have left, they are dropped from the view
// too: dropping each as it left moved half the view, megabytes at a long
// queue, for every job that ended. v.mu is held.
func (v *jobView) give() []engine.Job {
	out, gone := v.given[:0], 0
	for r := 0; r < len(v.jobs); {
		if v.jobs[r].ID < 0 {
			gone, r = gone+1, r+1
			continue
		}
		end := r + 1
		for end < len(v.jobs) && v.jobs[end].ID > 0 {
			end++
		}
		out = append(out, v.jobs[r:end]...)
		r = end
	}
	if len(v.given) > len(out) {
		clear(v.given[len(out):]) // keeps nothing of jobs gone
	}
	v.given = cloneJobs(out)
	if gone > len(v.jobs)/4 {
		v.jobs = dropLeft(v.jobs)
	}
	return v.given
}

// viewAccounts reads the Unix accounts of the view's owners and sets
// them on its jobs: on all of them when all is set or an account
// changed (a new owner, one gone, an admin's choice), else none (merge
// gave the jobs it applied the accounts last read). v.mu is held.
func (s Store) viewAccounts(ctx context.Context, all bool) error {
	v := s.view
	users := make([]string, 0, len(v.users))
	for u := range v.users {
		users = append(users, u)
	}
	slices.Sort(users)
	accounts, err := s.UnixAccounts(ctx, users)
	if err != nil {
		return err
	}
	if !all && maps.Equal(accounts, v.accounts) {
		return nil
	}
	v.accounts = accounts
	for i := range v.jobs {
		v.jobs[i].Account = accounts[v.jobs[i].User]
	}
	return nil
}

// setAccounts sets the Unix account of each job's owner, read whole.
func (s Store) setAccounts(ctx context.Context, js []engine.Job) error {
	accounts, err := s.UnixAccounts(ctx, owners(js))
	if err != nil {
		return err
	}
	for i := range js {
		js[i].Account = accounts[js[i].User]
	}
	return nil
}

// changedSince reads the rows changed at or after since that the view
// has not applied as they are: a change is read again for changeOverlap
// after it, and most rows in that window are the view's already. The
// stamps of the rows read are kept while they are in the window. v.mu
// is held.
func (s Store) changedSince(ctx context.Context, since time.Time) ([]models.Job, error) {
	v := s.view
	stamps, err := s.JobStampsSince(ctx, since)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, st := range stamps {
		if at, ok := v.applied[st.ID]; !ok || !at.Equal(st.UpdatedAt) {
			ids = append(ids, st.ID)
		}
	}
	changed, err := s.JobsByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	if v.applied == nil {
		v.applied = make(map[int64]time.Time)
	}
	for id, at := range v.applied {
		if at.Before(since) {
			delete(v.applied, id) // out of the window: not read again
		}
	}
	for _, j := range changed {
		v.applied[j.ID] = j.UpdatedAt
	}
	return changed, nil
}

// merge applies changed, rows ordered by ID, to jobs, ordered by ID: a
// row the engine acts on replaces its job or joins in its place, any
// other leaves. A job that leaves stays in its place, its ID negated (a
// job that left: give and dropLeft leave it out), and comes back there if
// it is to be scheduled again. It reuses jobs' array where it can and
// returns the jobs still ordered by their IDs' absolute values. With a
// view, it keeps the view's count of jobs by owner and gives the jobs it
// applies the accounts last read.
func (s Store) merge(jobs []engine.Job, changed []models.Job) []engine.Job {
	if len(changed) == 0 {
		return jobs
	}
	if !slices.IsSortedFunc(changed, func(a, b models.Job) int { return cmp.Compare(a.ID, b.ID) }) {
		changed = slices.Clone(changed)
		slices.SortFunc(changed, func(a, b models.Job) int { return cmp.Compare(a.ID, b.ID) })
	}
	// Changes to jobs already there, and how many join: most rows
	// changed are jobs the view has (a start, an end, a queue move), and
	// are applied in place.
	joins := 0
	for i := range changed {
		c := &changed[i]
		k, found := searchJobs(jobs, c.ID)
		left := found && jobs[k].ID < 0
		switch {
		case found && schedulable(c):
			if !left {
				s.count(jobs[k].User, -1)
			}
			jobs[k] = s.viewJob(*c)
		case found && !left:
			s.count(jobs[k].User, -1)
			jobs[k].ID = -jobs[k].ID // leaves
		case !found && schedulable(c):
			joins++
		}
	}
	if joins == 0 {
		return jobs
	}
	// New jobs: merge them in from the end, in place.
	n := len(jobs)
	jobs = slices.Grow(jobs, joins)[:n+joins]
	i, w := n-1, n+joins-1
	for c := len(changed) - 1; c >= 0; c-- {
		row := &changed[c]
		if !schedulable(row) {
			continue
		}
		if _, found := searchJobs(jobs[:i+1], row.ID); found {
			continue // applied in place above
		}
		for i >= 0 && abs(jobs[i].ID) > row.ID {
			jobs[w] = jobs[i]
			i, w = i-1, w-1
		}
		jobs[w] = s.viewJob(*row)
		w--
	}
	return jobs
}

// searchJobs finds job id among jobs ordered by their IDs' absolute
// values (merge), whether it is there or left (its ID negated).
func searchJobs(jobs []engine.Job, id int64) (int, bool) {
	lo, hi := 0, len(jobs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if abs(jobs[m].ID) < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(jobs) && abs(jobs[lo].ID) == id
}

func abs(id int64) int64 {
	if id < 0 {
		return -id
	}
	return id
}

// dropLeft removes the jobs merge marked as left (a negative ID), moving
// the runs of jobs between them whole.
func dropLeft(jobs []engine.Job) []engine.Job {
	w := 0
	for w < len(jobs) && jobs[w].ID > 0 {
		w++
	}
	if w == len(jobs) {
		return jobs
	}
	for r := w + 1; r < len(jobs); {
		if jobs[r].ID < 0 {
			r++
			continue
		}
		end := r + 1
		for end < len(jobs) && jobs[end].ID > 0 {
			end++
		}
		w += copy(jobs[w:], jobs[r:end])
		r = end
	}
	clear(jobs[w:])
	return jobs[:w]
}

// viewJob is a row the view applies, as an engine job with its owner's
// account as last read (jobView.accounts), and counted as the owner's.
func (s Store) viewJob(row models.Job) engine.Job {
	j := s.engineJob(row)
	if s.view != nil {
		s.view.intern(&j)
		j.Account = s.view.accounts[j.User]
	}
	s.count(j.User, 1)
	return j
}

// intern gives j the view's copies of its team and owner names (names).
// v.mu is held.
func (v *jobView) intern(j *engine.Job) {
	if v.names == nil {
		v.names = make(map[string]string)
	}
	j.Team, j.User = v.name(j.Team), v.name(j.User)
}

// name returns the view's copy of s, making s it if there is none.
func (v *jobView) name(s string) string {
	if c, ok := v.names[s]; ok {
		return c
	}
	v.names[s] = s
	return s
}

// count adds n to the view's count of user's jobs; without a view it
// does nothing.
func (s Store) count(user string, n int) {
	v := s.view
	if v == nil || v.users == nil {
		return
	}
	if v.users[user] += n; v.users[user] <= 0 {
		delete(v.users, user)
	}
}

// readAll reads every job the engine acts on.
func (s Store) readAll(ctx context.Context) ([]engine.Job, error) {
	out, _, err := s.readWhole(ctx)
	return out, err
}

// readWhole reads every job the engine acts on, and the stamp
// (updated_at) of each row as read.
func (s Store) readWhole(ctx context.Context) ([]engine.Job, []time.Time, error) {
	js, err := s.JobsToSchedule(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := make([]engine.Job, len(js))
	stamps := make([]time.Time, len(js))
	for i, j := range js {
		out[i], stamps[i] = s.engineJob(j), j.UpdatedAt
	}
	return out, stamps, nil
}

// schedulable says whether the engine acts on j, as JobsToSchedule
// chooses: unfinished, and not held unless a replica asked for its cancel.
func schedulable(j *models.Job) bool {
	return slices.Contains(models.UnfinishedStates, j.State) && (!j.Held() || j.CancelRequest != "")
}

// cloneJobs gives each job its own dependencies, whose states the caller
// fills in, so that the view's stay as read.
func cloneJobs(js []engine.Job) []engine.Job {
	for i := range js {
		js[i].Deps = slices.Clone(js[i].Deps)
	}
	return js
}
