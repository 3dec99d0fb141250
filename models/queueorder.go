package models

import (
	"context"
	"fmt"
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
func (r *QueueRow) Held() bool {
	j := Job{State: r.State, RequeueStalls: r.RequeueStalls, HoldReason: r.HoldReason}
	return j.Held()
}

// QueueRows returns every unfinished job's QueueRow, by ID.
func (s *Store) QueueRows(ctx context.Context) ([]QueueRow, error) {
	var rows []QueueRow
	db := s.db.WithContext(ctx)
	gpus := db.NamingStrategy.ColumnName("jobs", "GPUs")
	err := db.Model(&Job{}).
		Select("id, name, team, jobs."+quoteUser(db)+", "+gpus+", state, queue_index, queue_since, submitted_at, requeue_stalls, hold_reason").
		Where("state IN ?", UnfinishedStates).Order("id").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list the queues' jobs: %w", err)
	}
	return rows, nil
}

// JobsByID returns the jobs ids that exist, in the order of ids: a page
// of jobs whose order was computed elsewhere.
func (s *Store) JobsByID(ctx context.Context, ids []int64) ([]Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var js []Job
	byID := make(map[int64]Job, len(ids))
	for from := 0; from < len(ids); from += 500 {
		part := ids[from:min(from+500, len(ids))]
		if err := s.db.WithContext(ctx).Where("id IN ?", part).Find(&js).Error; err != nil {
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

// QueueCount is how many unfinished jobs of a team are in one queue and
// state.
type QueueCount struct {
	QueueIndex int
	Team       string
	State      JobState
	N          int
}

// QueueCounts counts the unfinished jobs by queue, team and state, in
// the database.
func (s *Store) QueueCounts(ctx context.Context) ([]QueueCount, error) {
	var rows []QueueCount
	err := s.db.WithContext(ctx).Model(&Job{}).Select("queue_index, team, state, count(*) AS n").
		Where("state IN ?", UnfinishedStates).Group("queue_index, team, state").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("count the queues' jobs: %w", err)
	}
	return rows, nil
}

// JCTsSince returns the completion times, in seconds, of the jobs that
// succeeded or failed at or after since, the oldest first, at most limit
// of them: the window of the live JCT figures. It reads two columns of
// those jobs alone (the index on finished_at, migration 38).
func (s *Store) JCTsSince(ctx context.Context, since time.Time, limit int) ([]float64, error) {
	var rows []struct {
		SubmittedAt time.Time
		FinishedAt  time.Time
	}
	err := s.db.WithContext(ctx).Model(&Job{}).Select("submitted_at, finished_at").
		Where("finished_at >= ? AND state IN ?", since, []JobState{JobSucceeded, JobFailed}).
		Order("finished_at").Limit(limit).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list the completion times since %s: %w", since.Format(time.RFC3339), err)
	}
	out := make([]float64, len(rows))
	for i, r := range rows {
		out[i] = r.FinishedAt.Sub(r.SubmittedAt).Seconds()
	}
	return out, nil
}
