package models

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"
)

// The JCT figures (GET /api/v1/stats/jct, the Queues page, the jct topic
// every 5 s) read the completion times of every job that ended in their
// window, 24 hours by default: thousands of rows each time on a busy
// cluster (issue 33). The store keeps them between reads as the queues'
// rows (queueview.go): a read takes only the jobs whose row changed since
// the last (jobs.updated_at, which ending a job sets), a change read again
// for queueOverlap, with a whole read every jctFullRead, and drops those
// that left the window.

// jctFullRead is how often the window is read whole all the same: its
// cost follows the jobs that ended in it, not the queue.
const jctFullRead = 5 * time.Minute

// jctRow is one ended job's completion.
type jctRow struct {
	ID         int64
	FinishedAt time.Time
	JCT        float64 // seconds
	// Counted: the job succeeded or failed. A row read that is not
	// (waiting, running, cancelled) only takes a job's row out.
	Counted bool
}

// jctView is the completions of the jobs that succeeded or failed at or
// after since, by finished_at and ID, as last read.
type jctView struct {
	mu     sync.Mutex
	since  time.Time // the window the rows cover; zero: none read yet
	rows   []jctRow
	readAt time.Time // when the last read began
	fullAt time.Time // when the last whole read began
}

// JCTsSince returns the completion times, in seconds, of the jobs that
// succeeded or failed at or after since, the oldest first, at most limit
// of them: the window of the live JCT figures. A window that begins no
// earlier than the last one read is served from the rows kept
// (jctView); an earlier one is read whole (the index on finished_at,
// migration 38) and kept from then on.
func (s *Store) JCTsSince(ctx context.Context, since time.Time, limit int) ([]float64, error) {
	v := &s.jcts
	v.mu.Lock()
	defer v.mu.Unlock()
	began := time.Now()
	if v.since.IsZero() || since.Before(v.since) || began.Sub(v.fullAt) >= jctFullRead || began.Before(v.readAt) {
		rows, err := s.readJCTs(ctx, "finished_at >= ?", since)
		if err != nil {
			return nil, err
		}
		v.rows, v.since, v.readAt, v.fullAt = slices.DeleteFunc(rows, func(r jctRow) bool { return !r.Counted }), since, began, began
	} else {
		changed, err := s.readJCTs(ctx, "updated_at >= ?", v.readAt.Add(-queueOverlap))
		if err != nil {
			return nil, err
		}
		v.readAt = began
		v.rows = mergeJCTs(v.rows, changed, v.since)
	}
	// Drop what left the window: every later window begins later still.
	cut, _ := slices.BinarySearchFunc(v.rows, since, func(r jctRow, t time.Time) int { return r.FinishedAt.Compare(t) })
	v.rows, v.since = v.rows[cut:], since
	n := min(limit, len(v.rows))
	out := make([]float64, n)
	for i := range n {
		out[i] = v.rows[i].JCT
	}
	return out, nil
}

// readJCTs reads the completions of the jobs where holds, by finished_at
// and ID, counted or not (jctRow.Counted). where names one indexed
// column and nothing else (jctQuery).
func (s *Store) readJCTs(ctx context.Context, where string, args ...any) ([]jctRow, error) {
	var rows []struct {
		ID          int64
		State       JobState
		SubmittedAt time.Time
		FinishedAt  *time.Time
	}
	if err := jctQuery(s.db.WithContext(ctx), where, args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("list the completion times: %w", err)
	}
	out := make([]jctRow, len(rows))
	for i, r := range rows {
		out[i] = jctRow{ID: r.ID}
		if r.FinishedAt != nil && (r.State == JobSucceeded || r.State == JobFailed) {
			out[i].FinishedAt, out[i].JCT, out[i].Counted = *r.FinishedAt, r.FinishedAt.Sub(r.SubmittedAt).Seconds(), true
		}
	}
	slices.SortFunc(out, compareJCTRows)
	return out, nil
}

// jctQuery selects what readJCTs reads of the jobs where holds. The
// state is not asked of the database: beside a range of finished_at or
// updated_at, SQLite, which plans by its rules alone, would take the
// equality on state for the better condition and read every finished
// job of the table by the state index (52 ms a read with 100,000 of
// them, issue 33), and sort them too; the window's jobs in other states
// are few. TestJCTReadsPlans.
func jctQuery(db *gorm.DB, where string, args ...any) *gorm.DB {
	return db.Model(&Job{}).Select("id, state, submitted_at, finished_at").Where(where, args...)
}

// compareJCTRows orders jctRows by finished_at and ID.
func compareJCTRows(a, b jctRow) int {
	return cmp.Or(a.FinishedAt.Compare(b.FinishedAt), cmp.Compare(a.ID, b.ID))
}

// mergeJCTs puts changed in place of the rows of the same jobs in rows
// (by finished_at and ID), leaving out those not counted or that ended
// before since; rows is not changed in place.
func mergeJCTs(rows, changed []jctRow, since time.Time) []jctRow {
	if len(changed) == 0 {
		return rows
	}
	ids := make(map[int64]bool, len(changed))
	for _, c := range changed {
		ids[c.ID] = true
	}
	out := make([]jctRow, 0, len(rows)+len(changed))
	for _, r := range rows {
		if !ids[r.ID] {
			out = append(out, r)
		}
	}
	for _, c := range changed {
		if c.Counted && !c.FinishedAt.Before(since) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, compareJCTRows)
	return out
}
