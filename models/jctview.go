package models

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
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
		v.rows, v.since, v.readAt, v.fullAt = rows, since, began, began
	} else {
		changed, err := s.readJCTs(ctx, "updated_at >= ? AND finished_at >= ?", v.readAt.Add(-queueOverlap), v.since)
		if err != nil {
			return nil, err
		}
		v.readAt = began
		v.rows = mergeJCTs(v.rows, changed)
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

// readJCTs reads the completions of the jobs that succeeded or failed
// where holds, by finished_at and ID.
func (s *Store) readJCTs(ctx context.Context, where string, args ...any) ([]jctRow, error) {
	var rows []struct {
		ID          int64
		SubmittedAt time.Time
		FinishedAt  time.Time
	}
	err := s.db.WithContext(ctx).Model(&Job{}).Select("id, submitted_at, finished_at").
		Where(where, args...).Where("state IN ?", []JobState{JobSucceeded, JobFailed}).
		Order("finished_at, id").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list the completion times: %w", err)
	}
	out := make([]jctRow, len(rows))
	for i, r := range rows {
		out[i] = jctRow{ID: r.ID, FinishedAt: r.FinishedAt, JCT: r.FinishedAt.Sub(r.SubmittedAt).Seconds()}
	}
	return out, nil
}

// mergeJCTs adds changed (by finished_at and ID) to rows, replacing a
// job's row read before; rows is not changed in place.
func mergeJCTs(rows, changed []jctRow) []jctRow {
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
	out = append(out, changed...)
	slices.SortStableFunc(out, func(a, b jctRow) int {
		return cmp.Or(a.FinishedAt.Compare(b.FinishedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}
