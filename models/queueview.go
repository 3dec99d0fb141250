package models

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"
)

// The queues, team pages and /metrics place and count every unfinished
// job (QueueRows), and between two reads few of them change. Reading
// 10,000 rows each time was most of what those reads cost (issue 33),
// so the store keeps the rows of its last read and reads only the jobs
// whose row changed since (jobs.updated_at, indexed, which every change
// of a job sets, whichever replica makes it: the engine's view of the
// jobs, enginestore/view.go, relies on the same). A change is read again
// for queueOverlap after it: enough for a transaction that commits after
// the read that followed its write, and for the replicas' clocks to
// differ by that much. Whatever slips past that all the same (a row
// deleted, a clock further off) is put right by a sweep: at most once
// every queueSweepEvery, a read also reads whole the unfinished jobs of
// the next queueSweepIDs IDs, from where the last step stopped, and
// starts again from the first unfinished job at the newest, so that a
// queue of 10,000 is read again whole every 10 s or so in steps that
// cost the same at any length. (It was a
// whole read every 5 minutes, which cost the read that met it 100 ms at
// 10,000 queued.)
const (
	queueOverlap    = 5 * time.Second
	queueSweepIDs   = 1000
	queueSweepEvery = time.Second
)

// queueView is every unfinished job's QueueRow as last read.
type queueView struct {
	mu     sync.Mutex
	rows   []QueueRow // by ID; replaced on a change, never changed in place
	counts []QueueCount
	readAt time.Time // when the last read began; zero: none yet
	// sweptTo is the ID the sweep has read up to (0: it starts again from
	// the first), sweptAt when it last read.
	sweptTo int64
	sweptAt time.Time
}

// QueueRows returns every unfinished job's QueueRow, by ID. The slice is
// shared by every caller until a job changes: read it, do not change it.
func (s *Store) QueueRows(ctx context.Context) ([]QueueRow, error) {
	rows, _, err := s.queueRows(ctx)
	return rows, err
}

// QueueCounts counts the unfinished jobs by queue, team and state, in
// that order; as QueueRows, the slice is shared.
func (s *Store) QueueCounts(ctx context.Context) ([]QueueCount, error) {
	_, counts, err := s.queueRows(ctx)
	return counts, err
}

// queueRows brings the view up to date and returns its rows and counts.
func (s *Store) queueRows(ctx context.Context) ([]QueueRow, []QueueCount, error) {
	v := &s.queues
	v.mu.Lock()
	defer v.mu.Unlock()
	began := time.Now()
	if v.readAt.IsZero() || began.Before(v.readAt) {
		rows, err := s.readQueueRows(ctx, 0, "state IN ?", UnfinishedStates)
		if err != nil {
			return nil, nil, err
		}
		v.rows, v.counts = rows, countQueues(rows)
		v.readAt, v.sweptTo, v.sweptAt = began, 0, began
		return v.rows, v.counts, nil
	}
	changed, err := s.readQueueRows(ctx, 0, "updated_at >= ?", v.readAt.Add(-queueOverlap))
	if err != nil {
		return nil, nil, err
	}
	v.readAt = began
	rows, differs := mergeQueueRows(v.rows, changed)
	if began.Sub(v.sweptAt) >= queueSweepEvery {
		var err error
		var sweptDiffers bool
		if rows, sweptDiffers, err = s.sweepQueueRows(ctx, v, rows); err != nil {
			return nil, nil, err
		}
		v.sweptAt, differs = began, differs || sweptDiffers
	}
	if differs {
		v.rows, v.counts = rows, countQueues(rows)
	}
	return v.rows, v.counts, nil
}

// sweepQueueRows reads the next step of the sweep whole: the unfinished
// jobs with an ID in the queueSweepIDs after where the last step ended,
// or after the first unfinished job kept, and puts them in place of
// those of rows: a new slice and true, or rows and false when nothing
// differed. A range of IDs rather than a number of jobs, so that
// each step reads a bounded range of the primary key whatever the
// states; the step that reaches the newest job ends the sweep.
func (s *Store) sweepQueueRows(ctx context.Context, v *queueView, rows []QueueRow) ([]QueueRow, bool, error) {
	var last int64
	if err := s.db.WithContext(ctx).Model(&Job{}).Select("COALESCE(MAX(id), 0)").Scan(&last).Error; err != nil {
		return nil, false, fmt.Errorf("sweep the queues' jobs: %w", err)
	}
	from := v.sweptTo
	if len(rows) > 0 {
		from = max(from, rows[0].ID-1) // the jobs before the first unfinished one have ended
	}
	from = min(from, last)
	to := from + queueSweepIDs
	swept, err := s.readQueueRows(ctx, 0, "id > ? AND id <= ? AND state IN ?", from, to, UnfinishedStates)
	if err != nil {
		return nil, false, err
	}
	v.sweptTo = to
	if to >= last {
		to, v.sweptTo = math.MaxInt64, 0 // and a job newer still comes in at the next step
	}
	byID := func(r QueueRow, id int64) int { return cmp.Compare(r.ID, id) }
	lo, _ := slices.BinarySearchFunc(rows, from+1, byID)
	hi := len(rows)
	if to < math.MaxInt64 {
		hi, _ = slices.BinarySearchFunc(rows, to+1, byID)
	}
	if hi-lo == len(swept) {
		same := true
		for i := range swept {
			if rows[lo+i].ID != swept[i].ID || !sameQueueRow(&rows[lo+i], &swept[i]) {
				same = false
				break
			}
		}
		if same {
			return rows, false, nil
		}
	}
	out := make([]QueueRow, 0, lo+len(swept)+len(rows)-hi)
	return append(append(append(out, rows[:lo]...), swept...), rows[hi:]...), true, nil
}

// readQueueRows reads the QueueRows of the jobs where holds, in any
// state, by ID, at most limit of them (0: all). Each column is scanned
// by its scanner (colscan.go), as a queue's page is (QueueJobsByID): the
// sweep reads 1,000 rows a second.
func (s *Store) readQueueRows(ctx context.Context, limit int, where string, args ...any) ([]QueueRow, error) {
	db := s.db.WithContext(ctx)
	gpus := db.NamingStrategy.ColumnName("jobs", "GPUs")
	since := "queue_since"
	if db.Dialector.Name() == "postgres" {
		since = "CAST(queue_since AS double precision)" // as in queueJobsQuery
	}
	q := db.Model(&Job{}).
		Select("id, name, team, jobs."+quoteUser(db)+", "+gpus+", state, queue_index, "+since+", submitted_at, requeue_stalls, hold_reason").
		Where(where, args...)
	if limit > 0 {
		// A bounded sweep takes the first IDs of its range: ordered by the
		// query, which searches the primary key for it.
		q = q.Order("id").Limit(limit)
	}
	rows, err := scanQueueRows(q)
	if err != nil {
		return nil, fmt.Errorf("list the queues' jobs: %w", err)
	}
	// Ordered here when the read is not limited, not by the query: SQLite
	// would read the whole table in the order of IDs rather than search
	// the index on updated_at.
	slices.SortFunc(rows, func(a, b QueueRow) int { return cmp.Compare(a.ID, b.ID) })
	return rows, nil
}

// scanQueueRows runs q, which selects a QueueRow's columns in its order.
func scanQueueRows(q *gorm.DB) ([]QueueRow, error) {
	rs, err := q.Rows()
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var rows []QueueRow
	for rs.Next() {
		rows = append(rows, QueueRow{})
		r := &rows[len(rows)-1]
		if err := rs.Scan(int64Col{&r.ID}, strCol{&r.Name}, strCol{&r.Team}, strCol{&r.User}, intCol{&r.GPUs},
			strCol{(*string)(&r.State)}, intCol{&r.QueueIndex}, float64Col{&r.QueueSince}, timeCol{&r.SubmittedAt},
			intCol{&r.RequeueStalls}, strCol{&r.HoldReason}); err != nil {
			return nil, err
		}
	}
	return rows, rs.Err()
}

// mergeQueueRows applies changed (by ID, in any state) to rows (by ID,
// unfinished): a new slice and true, or rows and false when nothing that
// rows holds changed.
func mergeQueueRows(rows, changed []QueueRow) ([]QueueRow, bool) {
	differs := false
	for i := range changed {
		c := &changed[i]
		k, found := slices.BinarySearchFunc(rows, c.ID, func(r QueueRow, id int64) int { return cmp.Compare(r.ID, id) })
		if found != slices.Contains(UnfinishedStates, c.State) || found && !sameQueueRow(&rows[k], c) {
			differs = true
			break
		}
	}
	if !differs {
		return rows, false
	}
	out := make([]QueueRow, 0, len(rows)+len(changed))
	i, k := 0, 0
	for i < len(rows) || k < len(changed) {
		switch {
		case k == len(changed) || i < len(rows) && rows[i].ID < changed[k].ID:
			out = append(out, rows[i])
			i++
		default:
			if i < len(rows) && rows[i].ID == changed[k].ID {
				i++ // the changed row replaces it
			}
			if slices.Contains(UnfinishedStates, changed[k].State) {
				out = append(out, changed[k])
			}
			k++
		}
	}
	return out, true
}

// sameQueueRow says whether a and b hold the same figures.
func sameQueueRow(a, b *QueueRow) bool {
	x, y := *a, *b
	x.SubmittedAt, y.SubmittedAt = time.Time{}, time.Time{}
	return x == y && a.SubmittedAt.Equal(b.SubmittedAt)
}

// countQueues counts rows by queue, team and state, in that order.
func countQueues(rows []QueueRow) []QueueCount {
	type key struct {
		queue int
		team  string
		state JobState
	}
	n := make(map[key]int)
	for i := range rows {
		n[key{rows[i].QueueIndex, rows[i].Team, rows[i].State}]++
	}
	out := make([]QueueCount, 0, len(n))
	for k, c := range n {
		out = append(out, QueueCount{QueueIndex: k.queue, Team: k.team, State: k.state, N: c})
	}
	slices.SortFunc(out, func(a, b QueueCount) int {
		return cmp.Or(cmp.Compare(a.QueueIndex, b.QueueIndex), cmp.Compare(a.Team, b.Team), cmp.Compare(a.State, b.State))
	})
	return out
}
