package models

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// QueueRow is what places an unfinished job in the queues and counts it
// (issue 33): the few columns a queue's order, its counts and a team's
// counts are computed from, without the job's command, environment or
// reasons, so that reading 10,000 of them costs what the counts show.
type QueueRow struct {
	ID            int64
	Name          string
	Team          string
	User          string
	GPUs          int
	State         JobState
	QueueIndex    int
	QueueSince    float64
	SubmittedAt   time.Time
	RequeueStalls int
	HoldReason    string
}

// Held is as Job.Held.
func (r *QueueRow) Held() bool { return held(r.State, r.RequeueStalls, r.HoldReason) }

// JobsByID returns the jobs ids that exist, in the order of ids: a page
// of jobs whose order was computed elsewhere.
func (s *Store) JobsByID(ctx context.Context, ids []int64) ([]Job, error) {
	return s.jobsByID(ctx, ids, nil)
}

// jobsByID is JobsByID reading fields alone (nil: all).
func (s *Store) jobsByID(ctx context.Context, ids []int64, fields []string) ([]Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var js []Job
	byID := make(map[int64]Job, len(ids))
	for from := 0; from < len(ids); from += 500 {
		part := ids[from:min(from+500, len(ids))]
		q := s.db.WithContext(ctx)
		if fields != nil {
			q = q.Select(fields)
		}
		if err := q.Where("id IN ?", part).Find(&js).Error; err != nil {
			return nil, fmt.Errorf("read jobs %d to %d: %w", part[0], part[len(part)-1], err)
		}
		for _, j := range js {
			byID[j.ID] = j
		}
	}
	out := make([]Job, 0, len(ids))
	for _, id := range ids {
		if j, ok := byID[id]; ok {
			out = append(out, j)
		}
	}
	return out, nil
}

// queueJobFields are the fields of a job that its entry in a queue or a
// team's queue shows (app's Moment.QueueJob: its figures, place, reason
// and forecast), of the 75 a job has: a page of 100 entries reads and
// decodes a third as much (issue 33). TestQueueJobsByID converts jobs of
// each kind from them and from the whole row.
var queueJobFields = []string{"ID", "Name", "Team", "User", "GPUs", "State", "Reason", "Priority", "SessionType",
	"Dependencies", "ArrayLimit", "Run", "Placement", "LastStartAt", "ExecutedS", "AttainedService",
	"RunAccrualS", "RunGPUSeconds", "HeldGPUs", "RequeueStalls", "HoldReason"}

// QueueJobsByID is JobsByID with the fields a queue's entry shows alone
// (queueJobFields), the others left zero.
func (s *Store) QueueJobsByID(ctx context.Context, ids []int64) ([]Job, error) {
	return s.jobsByID(ctx, ids, queueJobFields)
}

// QueueCount is how many unfinished jobs of a team are in one queue and
// state.
type QueueCount struct {
	QueueIndex int
	Team       string
	State      JobState
	N          int
}

// OrderQueues places rows (by ID) in n queues, in the one order every
// screen shows: in each queue its running jobs first, by when they
// entered it, then its waiting jobs by position (what each one's "N jobs
// ahead" counts), then those of no known position (held, or on a
// follower) by when they entered it. place gives a row's queue and its
// position, 0 for none; a queue out of range counts as the nearest.
// Positions are placed by number rather than sorted, so that ordering
// 10,000 jobs costs a pass over them (issue 33).
func OrderQueues(rows []QueueRow, n int, place func(*QueueRow) (queue, pos int)) [][]*QueueRow {
	type queue struct {
		running, unplaced []*QueueRow
		placed            []*QueueRow // by position; nil where none
		clash             bool        // two rows of one position
	}
	qs := make([]queue, n)
	for i := range rows {
		r := &rows[i]
		qi, pos := place(r)
		q := &qs[min(max(qi, 0), n-1)]
		switch {
		case r.State == JobRunning:
			q.running = append(q.running, r)
		case pos > 0:
			if pos > len(q.placed) {
				q.placed = slices.Grow(q.placed, pos-len(q.placed))[:pos]
			}
			if q.placed[pos-1] != nil {
				q.clash = true
				q.unplaced = append(q.unplaced, r)
				continue
			}
			q.placed[pos-1] = r
		default:
			q.unplaced = append(q.unplaced, r)
		}
	}
	byEntry := func(a, b *QueueRow) int { return cmp.Compare(a.Entered(), b.Entered()) }
	out := make([][]*QueueRow, n)
	for i := range qs {
		q := &qs[i]
		o := make([]*QueueRow, 0, len(q.running)+len(q.placed)+len(q.unplaced))
		slices.SortStableFunc(q.running, byEntry)
		o = append(o, q.running...)
		if q.clash { // not from one pass: place them all by position
			for _, r := range q.placed {
				if r != nil {
					q.unplaced = append(q.unplaced, r)
				}
			}
			rank := func(r *QueueRow) int {
				if _, pos := place(r); pos > 0 {
					return pos
				}
				return math.MaxInt // no position: after those that have one
			}
			slices.SortStableFunc(q.unplaced, func(a, b *QueueRow) int {
				return cmp.Or(cmp.Compare(rank(a), rank(b)), byEntry(a, b))
			})
			out[i] = append(o, q.unplaced...)
			continue
		}
		for _, r := range q.placed {
			if r != nil {
				o = append(o, r)
			}
		}
		slices.SortStableFunc(q.unplaced, byEntry)
		out[i] = append(o, q.unplaced...)
	}
	return out
}

// Entered is when the job entered its queue, in the scheduler's seconds.
func (r *QueueRow) Entered() float64 {
	if r.QueueSince > 0 {
		return r.QueueSince
	}
	return float64(r.SubmittedAt.UnixNano()) / 1e9
}
