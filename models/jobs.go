package models

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
)

// ErrConflict is returned when a job is not in a state that allows the change.
var ErrConflict = job.ErrConflict

// ErrStaleRun is returned for a change about a run that is not the job's
// current run: it is an ErrConflict too.
var ErrStaleRun = fmt.Errorf("not the job's current run: %w", ErrConflict)

// CreateArray stores the tasks of an array, queued, in one transaction:
// the first task's ID becomes every task's ArrayID.
func (s *Store) CreateArray(ctx context.Context, tasks []*Job) error {
	if len(tasks) == 0 {
		return fmt.Errorf("create array: no tasks")
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return createArray(tx, tasks) })
	if err == nil {
		s.writes.add("job", len(tasks))
	}
	return err
}

// createArray stores an array's tasks in tx, tasks[0] first.
func createArray(tx *gorm.DB, tasks []*Job) error {
	for i, j := range tasks {
		j.State, j.Reason = JobQueued, "submitted"
		if i > 0 {
			j.ArrayID = tasks[0].ID
		}
		if err := tx.Create(j).Error; err != nil {
			if errors.Is(err, gorm.ErrDuplicatedKey) {
				err = fmt.Errorf("idempotency key %q: %w", j.IdempotencyKey, ErrExists)
			}
			return fmt.Errorf("create task %d of array %q: %w", j.ArrayIndex, j.Name, err)
		}
		if i == 0 {
			j.ArrayID = j.ID
			if err := tx.Model(j).Update("array_id", j.ID).Error; err != nil {
				return fmt.Errorf("create array %q: %w", j.Name, err)
			}
		}
		if err := addEvent(tx, j, j.SubmittedAt); err != nil {
			return err
		}
	}
	return nil
}

// JobByIdempotencyKey returns user's job submitted with key
// (Job.IdempotencyKey), or ErrNotFound.
func (s *Store) JobByIdempotencyKey(ctx context.Context, user, key string) (*Job, error) {
	var j Job
	err := s.db.WithContext(ctx).Where(`"user" = ? AND idempotency_key = ?`, user, key).Take(&j).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("job of %s with idempotency key %q: %w", user, key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("job of %s with idempotency key %q: %w", user, key, err)
	}
	return &j, nil
}

// ArrayTasks returns the tasks of array id, by index.
func (s *Store) ArrayTasks(ctx context.Context, id int64) ([]Job, error) {
	var js []Job
	if err := s.db.WithContext(ctx).Where("array_id = ?", id).Order("array_index, id").Find(&js).Error; err != nil {
		return nil, fmt.Errorf("tasks of array %d: %w", id, err)
	}
	return js, nil
}

// Job returns the job with the given ID.
func (s *Store) Job(ctx context.Context, id int64) (*Job, error) {
	var j Job
	if err := s.db.WithContext(ctx).First(&j, id).Error; err != nil {
		return nil, notFound(err, fmt.Sprintf("job %d", id))
	}
	return &j, nil
}

// JobFilter narrows ListJobs. Zero fields do not filter.
type JobFilter struct {
	Team   string
	User   string
	States []JobState
	// Queue, when set, keeps the jobs in that priority queue
	// (Job.QueueIndex).
	Queue *int
	// Kind keeps the jobs that run a command (KindCommand) or a
	// simulated workload (KindSim).
	Kind string
	// Query keeps the jobs whose ID is Query, or whose name or command
	// holds Query, ignoring case; "#12" keeps only job 12.
	Query string
	// Before keeps the jobs with a smaller ID (the next page, newest
	// first); After the jobs with a larger one (the page before). At most
	// one is set; jobs come newest first either way.
	Before, After int64
	Limit         int // at most this many; 0 means 1000
}

// The kinds of job a JobFilter can keep.
const (
	KindCommand = "command"
	KindSim     = "sim"
)

// ListJobs returns jobs matching f, newest first. Pages by f.Before and
// f.After (keyset pagination on the ID) neither skip nor repeat a job
// while jobs are submitted: new jobs only ever get larger IDs.
func (s *Store) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	var js []Job
	if err := listJobsQuery(s.db.WithContext(ctx), f).Find(&js).Error; err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	if f.After > 0 {
		slices.Reverse(js)
	}
	return js, nil
}

// listJobsQuery is the query of ListJobs, in the order it reads rows.
func listJobsQuery(q *gorm.DB, f JobFilter) *gorm.DB {
	if f.After > 0 {
		q = q.Where("id > ?", f.After).Order("id ASC")
	} else {
		q = q.Order("id DESC")
	}
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	if f.Team != "" {
		q = q.Where("team = ?", f.Team)
	}
	if f.User != "" {
		q = q.Where("\"user\" = ?", f.User)
	}
	switch len(f.States) {
	case 0:
	case 1: // "=", not "IN": the (state, id) index gives the order
		q = q.Where("state = ?", f.States[0])
	default:
		q = q.Where("state IN ?", f.States)
	}
	if f.Queue != nil {
		q = q.Where("queue_index = ?", *f.Queue)
	}
	switch f.Kind {
	case KindCommand:
		q = q.Where("command IS NOT NULL AND command NOT IN ('', 'null', '[]')")
	case KindSim:
		q = q.Where("(command IS NULL OR command IN ('', 'null', '[]'))")
	}
	if f.Query != "" {
		like := "%" + likeEscaper.Replace(strings.ToLower(f.Query)) + "%"
		text := "LOWER(name) LIKE ? ESCAPE '\\' OR LOWER(command) LIKE ? ESCAPE '\\'"
		id, err := strconv.ParseInt(strings.TrimPrefix(f.Query, "#"), 10, 64)
		switch {
		case err == nil && strings.HasPrefix(f.Query, "#"):
			q = q.Where("id = ?", id)
		case err == nil:
			q = q.Where("(id = ? OR "+text+")", id, like, like)
		default:
			q = q.Where("("+text+")", like, like)
		}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	return q.Model(&Job{}).Limit(limit)
}

// likeEscaper escapes the wildcards of a LIKE pattern (ESCAPE '\').
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// UnfinishedJobs returns every queued, running or preempted job, oldest first.
func (s *Store) UnfinishedJobs(ctx context.Context) ([]Job, error) {
	var js []Job
	err := s.db.WithContext(ctx).Where("state IN ?", UnfinishedStates).Order("id").Find(&js).Error
	if err != nil {
		return nil, fmt.Errorf("list unfinished jobs: %w", err)
	}
	return js, nil
}

// RunningJobs returns every running job, oldest first: what a running
// job's share of its GPUs is figured from, without the waiting jobs.
func (s *Store) RunningJobs(ctx context.Context) ([]Job, error) {
	var js []Job
	err := s.db.WithContext(ctx).Where("state = ?", JobRunning).Order("id").Find(&js).Error
	if err != nil {
		return nil, fmt.Errorf("list running jobs: %w", err)
	}
	return js, nil
}

// MarkStarted records that a queued or preempted job now runs on
// placement, as a new run, and returns the run's number.
func (s *Store) MarkStarted(ctx context.Context, id int64, placement []string, now time.Time) (run int64, err error) {
	err = s.transition(ctx, id, now, startRun(Start{Job: id, Placement: placement}, now, &run))
	if err != nil {
		return 0, err
	}
	return run, nil
}

// Start is one start of a waiting job that MarkStartedAll records: on
// Placement, given CPUs whole CPUs over its machines (Job.AllocCPUs; 0
// when none were allocated).
type Start struct {
	Job       int64
	Placement []string
	CPUs      int64
}

// MarkStartedAll records the starts of a scheduling pass in one
// transaction, each as MarkStarted does, and returns each one's run
// number or why it could not be recorded (by index of starts): a start
// that fails leaves the others be. err is set only when the transaction
// itself failed, and then nothing is recorded.
func (s *Store) MarkStartedAll(ctx context.Context, starts []Start, now time.Time) (runs []int64, errs []error, err error) {
	runs, errs = make([]int64, len(starts)), make([]error, len(starts))
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for i, st := range starts {
			// Its own savepoint: one that fails is rolled back alone.
			errs[i] = tx.Transaction(func(tx *gorm.DB) error {
				return transitionTx(tx, st.Job, now, startRun(st, now, &runs[i]))
			})
			if errs[i] != nil {
				runs[i] = 0
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("record %d starts: %w", len(starts), err)
	}
	return runs, errs, nil
}

// startRun is the change that starts st, a new run of a waiting job; it
// sets *run to the run's number.
func startRun(st Start, now time.Time, run *int64) func(*Job) error {
	id, placement := st.Job, st.Placement
	return func(j *Job) error {
		if j.State != JobQueued && j.State != JobPreempted {
			return fmt.Errorf("start job %d in state %s: %w", id, j.State, ErrConflict)
		}
		if j.HoldReason != "" {
			// Held since the engine read it (its owner was disabled).
			return fmt.Errorf("start job %d: held: %w", id, ErrConflict)
		}
		j.Run++
		j.State = JobRunning
		j.Placement = placement
		j.AllocCPUs = st.CPUs
		j.Reason = ""
		j.RetryAt = nil
		j.LastStartAt = &now
		j.setAccrual(usage.Whole(j.GPUs))
		if j.StartedAt == nil {
			j.StartedAt = &now
		}
		*run = j.Run
		return nil
	}
}

// MarkResumed records that run, the last run of a job that was put back
// in the queue while its machine was away, runs on placement after all:
// its machine came back still running it, and nothing else runs the job.
// The run never stopped: it runs on as that run, its time counted on
// from when its record ended (the machine's loss, MarkStopped), not from
// now. MarkResumed returns that time, the start its time now counts from
// (now when the record has no end within [last start, now]).
func (s *Store) MarkResumed(ctx context.Context, ref job.RunRef, placement []string, reason string, now time.Time) (time.Time, error) {
	from := now
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return transitionTx(tx, ref.Job, now, func(j *Job) error {
			if !j.State.Waiting() || j.Run != ref.Run {
				return fmt.Errorf("resume run %d of job %d (state %s, run %d): %w", ref.Run, j.ID, j.State, j.Run, ErrConflict)
			}
			r, err := currentRun(tx, j, "ended_at")
			if err != nil {
				return fmt.Errorf("resume run %d of job %d: %w", ref.Run, j.ID, err)
			}
			if e := r.EndedAt; e != nil && !e.After(now) && (j.LastStartAt == nil || !e.Before(*j.LastStartAt)) {
				from = *e
			}
			j.State, j.Placement, j.Reason, j.RetryAt, j.LastStartAt = JobRunning, placement, reason, nil, &from
			j.setAccrual(usage.Whole(j.GPUs))
			return nil
		})
	})
	if err != nil {
		return time.Time{}, err
	}
	return from, nil
}

// MarkStopped records that run ref of a job stopped at now and moves the
// job to state to: JobPreempted or JobQueued put it back in the queue, a
// final state ends it. The time it ran is added to its executed time and
// attained service. Handover is what the run attained between the
// request to stop it and now: the scheduler's queues do not count it
// (sched.QueueState), the job's figures do. A run that is not the job's
// current one changes nothing and returns ErrStaleRun.
//
// A run taken back when its machine returned (MarkResumed) counts from
// the end its record had; when it stopped before that (its exit, kept by
// its machine, says so) its time is counted up to now, the record's end
// moved back.
func (s *Store) MarkStopped(ctx context.Context, ref job.RunRef, to JobState, exitCode *int, reason string, handover usage.Service, now time.Time) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return transitionTx(tx, ref.Job, now, func(j *Job) error {
			return j.markStopped(tx, ref, to, exitCode, reason, handover, now)
		})
	})
}

// markStopped is MarkStopped's change of j, in transaction tx.
func (j *Job) markStopped(tx *gorm.DB, ref job.RunRef, to JobState, exitCode *int, reason string, handover usage.Service, now time.Time) error {
	var before float64 // seconds counted before now, which the run did not run
	if checkRun(j, ref.Run) == nil && j.LastStartAt != nil && now.Before(*j.LastStartAt) {
		r, err := currentRun(tx, j, "started_at")
		if err != nil {
			return fmt.Errorf("stop run %d of job %d: %w", ref.Run, j.ID, err)
		}
		before = j.LastStartAt.Sub(later(now, r.StartedAt)).Seconds()
	}
	if err := j.stopRun(ref.Run, now); err != nil {
		return err
	}
	j.uncount(before)
	j.CycleService += max(handover.GPUSeconds, 0)
	j.CycleExecuted += max(handover.ExecutedS, 0)
	j.State = to
	j.Reason = truncate(reason, 512) // the column's size
	j.ExitCode = exitCode
	if !to.Final() {
		j.Placement = nil // a finished job keeps where it ran
	}
	if to == JobPreempted {
		j.Preemptions++
	}
	if to.Final() {
		j.FinishedAt = &now
	}
	return nil
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// uncount takes s seconds, counted for a run that did not run them, off
// j's executed time, and its service at the job's mean rate of GPUs held
// (its service over its executed time): what a whole-GPU job holds, and
// near what a sharing one does. Neither goes below 0. A negative s
// counts seconds run that were not counted.
func (j *Job) uncount(s float64) {
	if s == 0 {
		return
	}
	rate := 0.0
	if j.ExecutedS > 0 {
		rate = j.AttainedService / j.ExecutedS
	} else if !j.Sharing {
		rate = float64(j.GPUs)
	}
	j.ExecutedS = max(j.ExecutedS-s, 0)
	j.AttainedService = max(j.AttainedService-s*rate, 0)
}

// MarkStopping records the engine's request that run req.Run of job id
// stop (job.StopRequest), kept until the job's next run. A job that is
// not running that run is an error wrapping ErrConflict.
func (s *Store) MarkStopping(ctx context.Context, id int64, req job.StopRequest) error {
	res := s.db.WithContext(ctx).Model(&Job{}).Where("id = ? AND state = ? AND run = ?", id, JobRunning, req.Run).
		Updates(map[string]any{
			"stop_run": req.Run, "stop_to": req.To, "stop_reason": truncate(req.Reason, 512),
			"stop_code": req.Code, "stop_at": req.At,
		})
	if res.Error != nil {
		return fmt.Errorf("record the request to stop run %d of job %d: %w", req.Run, id, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("request to stop run %d of job %d: not its running run: %w", req.Run, id, ErrConflict)
	}
	return nil
}

// StopRequest returns the engine's request that the job's current or last
// run stop, nil when none was recorded for it.
func (j *Job) StopRequest() *job.StopRequest {
	if j.StopRun == 0 || j.StopRun != j.Run {
		return nil
	}
	req := job.StopRequest{Run: j.StopRun, To: j.StopTo, Reason: j.StopReason, Code: j.StopCode}
	if j.StopAt != nil {
		req.At = *j.StopAt
	}
	return &req
}

// MarkRetry records that run ref of a job failed with exitCode and puts
// the job back in the queue to start again no earlier than retryAt.
func (s *Store) MarkRetry(ctx context.Context, ref job.RunRef, exitCode int, reason string, retryAt, now time.Time) error {
	return s.transition(ctx, ref.Job, now, func(j *Job) error {
		if err := j.stopRun(ref.Run, now); err != nil {
			return err
		}
		j.State, j.Reason, j.ExitCode, j.Placement = JobQueued, truncate(reason, 512), &exitCode, nil
		j.Failures++
		j.RetryAt = &retryAt
		return nil
	})
}

// stopRun ends the job's current run, which must be run, at now, adding
// its time to the executed time and attained service.
func (j *Job) stopRun(run int64, now time.Time) error {
	if err := checkRun(j, run); err != nil {
		return err
	}
	s := j.Service(now)
	j.ExecutedS, j.AttainedService = s.ExecutedS, s.GPUSeconds
	j.setAccrual(usage.Whole(j.GPUs))
	return nil
}

// Cancel ends an unfinished job that is not running. A running job must be
// stopped first and then passed to MarkStopped.
func (s *Store) Cancel(ctx context.Context, id int64, reason string, now time.Time) error {
	return s.EndWaiting(ctx, id, JobCancelled, reason, now)
}

// EndWaiting ends a queued or preempted job in final state to, for
// reason: cancelled, or timed out when its time is used up.
func (s *Store) EndWaiting(ctx context.Context, id int64, to JobState, reason string, now time.Time) error {
	if !to.Final() {
		return fmt.Errorf("end job %d as %s: not a final state", id, to)
	}
	return s.transition(ctx, id, now, func(j *Job) error {
		if j.State != JobQueued && j.State != JobPreempted {
			return fmt.Errorf("end job %d in state %s as %s: %w", id, j.State, to, ErrConflict)
		}
		j.State = to
		j.Reason = reason
		j.FinishedAt = &now
		return nil
	})
}

// JobStates returns the states of the jobs ids that exist, as jobs that
// depend on them see them (job.Dependency): the ID of an array (its
// first task's) stands for the whole array, as in Slurm. An array is
// unfinished while any task is; then succeeded if every task did, else
// in the state of its first task, by index, that did not.
func (s *Store) JobStates(ctx context.Context, ids []int64) (map[int64]JobState, error) {
	out, _, err := s.JobStatesAndArrays(ctx, ids)
	return out, err
}

// JobStatesAndArrays is JobStates, with the IDs of ids that are arrays'
// (whose state is their tasks' together).
func (s *Store) JobStatesAndArrays(ctx context.Context, ids []int64) (map[int64]JobState, map[int64]bool, error) {
	out := make(map[int64]JobState, len(ids))
	if len(ids) == 0 {
		return out, nil, nil
	}
	var rows []struct {
		ID, ArrayID int64
		ArrayIndex  int
		State       JobState
	}
	q := s.db.WithContext(ctx).Model(&Job{}).Select("id, array_id, array_index, state")
	if err := q.Where("id IN ? OR array_id IN ?", ids, ids).Order("array_index, id").Scan(&rows).Error; err != nil {
		return nil, nil, fmt.Errorf("states of jobs %v: %w", ids, err)
	}
	arrays := map[int64][]JobState{}
	for _, r := range rows {
		if r.ArrayID != 0 && slices.Contains(ids, r.ArrayID) {
			arrays[r.ArrayID] = append(arrays[r.ArrayID], r.State)
		}
		if r.ArrayID != r.ID && slices.Contains(ids, r.ID) {
			out[r.ID] = r.State
		}
	}
	isArray := make(map[int64]bool, len(arrays))
	for id, states := range arrays {
		out[id] = arrayState(states)
		isArray[id] = true
	}
	return out, isArray, nil
}

// arrayState is the state of an array whose tasks are in states, by
// index (JobStates).
func arrayState(states []JobState) JobState {
	for _, st := range states {
		if !st.Final() {
			return JobQueued
		}
	}
	for _, st := range states {
		if st != JobSucceeded {
			return st
		}
	}
	return JobSucceeded
}

// SetReasons records why waiting jobs wait, in one transaction of a
// statement per reasonBatch jobs. Jobs no longer waiting are left alone.
func (s *Store) SetReasons(ctx context.Context, reasons map[int64]string) error {
	if len(reasons) == 0 {
		return nil
	}
	// In ID order, so that two writers lock rows in the same order.
	ids := slices.Sorted(maps.Keys(reasons))
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for from := 0; from < len(ids); from += reasonBatch {
			chunk := ids[from:min(len(ids), from+reasonBatch)]
			var b strings.Builder
			args := make([]any, 0, 2*len(chunk)+1)
			// A join with the new reasons, not CASE id WHEN ...: a CASE
			// is tried branch by branch for every row, so its cost grew
			// with the square of the chunk.
			b.WriteString("WITH r(id, reason) AS (VALUES ")
			for k, id := range chunk {
				if k > 0 {
					b.WriteString(", ")
				}
				if k == 0 {
					b.WriteString("(CAST(? AS BIGINT), CAST(? AS TEXT))")
				} else {
					b.WriteString("(?, ?)")
				}
				args = append(args, id, truncate(reasons[id], 512))
			}
			// updated_at stays: the engine, which alone writes reasons,
			// does not read them back (JobsChangedSince).
			b.WriteString(") UPDATE jobs SET reason = r.reason FROM r WHERE jobs.id = r.id AND jobs.state IN ?")
			args = append(args, []JobState{JobQueued, JobPreempted})
			if err := tx.Exec(b.String(), args...).Error; err != nil {
				return fmt.Errorf("set reasons of jobs %d to %d: %w", chunk[0], chunk[len(chunk)-1], err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.writes.add("wait_reason", len(ids))
	return nil
}

// reasonBatch is how many jobs one statement of SetReasons changes: two
// parameters each, far below SQLite's and PostgreSQL's limits.
const reasonBatch = 500

// lockJob loads job id within transaction tx, its row locked against
// other writers where the database can (PostgreSQL; SQLite serializes
// writing transactions anyway).
func lockJob(tx *gorm.DB, id int64) (*Job, error) {
	var j Job
	q := tx
	if tx.Dialector.Name() == "postgres" {
		q = tx.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	if err := q.First(&j, id).Error; err != nil {
		return nil, notFound(err, fmt.Sprintf("job %d", id))
	}
	return &j, nil
}

// transition loads job id, lets change modify it, saves it and records
// the new state in the job's history, all in one transaction with the row
// locked where the database can. A change that starts a run or ends one
// records it in the runs table too.
func (s *Store) transition(ctx context.Context, id int64, at time.Time, change func(*Job) error) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return transitionTx(tx, id, at, change)
	})
}

// transitionTx is transition within transaction tx.
func transitionTx(tx *gorm.DB, id int64, at time.Time, change func(*Job) error) error {
	j, err := lockJob(tx, id)
	if err != nil {
		return err
	}
	wasRunning, run := j.State == JobRunning, j.Run
	if err := change(j); err != nil {
		return err
	}
	if err := tx.Save(j).Error; err != nil {
		return fmt.Errorf("save job %d: %w", id, err)
	}
	switch running := j.State == JobRunning; {
	case running && j.Run != run:
		err = openRun(tx, j, at)
	case running && !wasRunning:
		err = reopenRun(tx, j)
	case wasRunning && !running:
		err = closeRun(tx, j, at)
	}
	if err != nil {
		return err
	}
	return addEvent(tx, j, at)
}

// EndedAmong returns those of ids whose jobs will never run again: in a
// final state, or gone (hub.JobStates: the copies of their checkpoints
// go).
func (s *Store) EndedAmong(ctx context.Context, ids []int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []struct {
		ID    int64
		State JobState
	}
	if err := s.db.WithContext(ctx).Model(&Job{}).Select("id", "state").Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("states of %d jobs: %w", len(ids), err)
	}
	live := make(map[int64]bool, len(rows))
	for _, r := range rows {
		live[r.ID] = !r.State.Final()
	}
	var ended []int64
	for _, id := range ids {
		if !live[id] {
			ended = append(ended, id)
		}
	}
	return ended, nil
}
