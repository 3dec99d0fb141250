package models

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
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

// queueJobFields are the fields of a job that its entry in a queue or a
// team's queue shows (app's Moment.QueueJob: its figures, place, reason
// and forecast), of the 75 a job has: a page of 100 entries reads and
// decodes a third as much (issue 33), each with the scanner of its
// column (colscan.go) rather than gorm's reflection. TestQueueJobsByID
// converts jobs of each kind from them and from the whole row.
var queueJobFields = []struct {
	name string
	col  func(j *Job) any // the scanner of j's field
}{
	{"ID", func(j *Job) any { return int64Col{&j.ID} }},
	{"Name", func(j *Job) any { return strCol{&j.Name} }},
	{"Team", func(j *Job) any { return strCol{&j.Team} }},
	{"User", func(j *Job) any { return strCol{&j.User} }},
	{"GPUs", func(j *Job) any { return intCol{&j.GPUs} }},
	{"State", func(j *Job) any { return strCol{(*string)(&j.State)} }},
	{"Reason", func(j *Job) any { return strCol{&j.Reason} }},
	{"Priority", func(j *Job) any { return strCol{&j.Priority} }},
	{"SessionType", func(j *Job) any { return strCol{&j.SessionType} }},
	{"Dependencies", func(j *Job) any { return &j.Dependencies }},
	{"ArrayLimit", func(j *Job) any { return intCol{&j.ArrayLimit} }},
	{"Run", func(j *Job) any { return int64Col{&j.Run} }},
	{"Placement", func(j *Job) any { return &j.Placement }},
	{"LastStartAt", func(j *Job) any { return timePtrCol{&j.LastStartAt} }},
	{"ExecutedS", func(j *Job) any { return float64Col{&j.ExecutedS} }},
	{"AttainedService", func(j *Job) any { return float64Col{&j.AttainedService} }},
	{"RunAccrualS", func(j *Job) any { return float64Col{&j.RunAccrualS} }},
	{"RunGPUSeconds", func(j *Job) any { return float64Col{&j.RunGPUSeconds} }},
	{"HeldGPUs", func(j *Job) any { return float64Col{&j.HeldGPUs} }},
	{"RequeueStalls", func(j *Job) any { return intCol{&j.RequeueStalls} }},
	{"HoldReason", func(j *Job) any { return strCol{&j.HoldReason} }},
}

// queueJobsQuery is the query of QueueJobsByID on db's dialect: the
// columns of queueJobFields, in their order, of the jobs whose ID is in
// its one argument. PostgreSQL's numeric columns are read as double
// precision: the driver gives a numeric as its decimal text, decoded
// from the binary digits with big integers, which float64Col would then
// parse; the cast rounds the same decimal to the nearest double, as
// strconv.ParseFloat does (TestQueueJobsReadAsGormReads).
func queueJobsQuery(db *gorm.DB) (string, error) {
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(&Job{}); err != nil {
		return "", fmt.Errorf("the jobs' columns: %w", err)
	}
	cols := make([]string, len(queueJobFields))
	for i, f := range queueJobFields {
		field := stmt.Schema.LookUpField(f.name)
		if field == nil {
			return "", fmt.Errorf("the jobs' columns: no field %s", f.name)
		}
		cols[i] = stmt.Quote(field.DBName)
		if field.DataType == schema.Float && db.Dialector.Name() == "postgres" {
			cols[i] = "CAST(" + cols[i] + " AS double precision)"
		}
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + stmt.Quote(stmt.Schema.Table) + " WHERE id IN ?", nil
}

// QueueJobsByID is JobsByID with the fields a queue's entry shows alone
// (queueJobFields), the others left zero.
func (s *Store) QueueJobsByID(ctx context.Context, ids []int64) ([]Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	s.queueJobsOnce.Do(func() { s.queueJobsSQL, s.queueJobsErr = queueJobsQuery(s.db) })
	if s.queueJobsErr != nil {
		return nil, s.queueJobsErr
	}
	js := make([]Job, 0, len(ids))
	dest := make([]any, len(queueJobFields))
	for from := 0; from < len(ids); from += 500 {
		part := ids[from:min(from+500, len(ids))]
		var err error
		if js, err = s.scanQueueJobs(ctx, js, dest, part); err != nil {
			return nil, fmt.Errorf("read jobs %d to %d: %w", part[0], part[len(part)-1], err)
		}
	}
	// In the order of ids: the query's is the database's.
	at := make(map[int64]int, len(ids))
	for i, id := range ids {
		if _, ok := at[id]; !ok {
			at[id] = i
		}
	}
	if len(at) == len(ids) { // each once: in place
		placeInOrder(js, at)
		return js, nil
	}
	byID := make(map[int64]int, len(js))
	for i := range js {
		byID[js[i].ID] = i
	}
	out := make([]Job, 0, len(ids))
	for _, id := range ids {
		if i, ok := byID[id]; ok {
			out = append(out, js[i])
		}
	}
	return out, nil
}

// placeInOrder puts js in the order of their places in at (one each,
// none shared), moving each job once.
func placeInOrder(js []Job, at map[int64]int) {
	place := make([]int, len(js))
	order := make([]int, len(js)) // order[k]: the index in js of the k-th job
	for i := range js {
		place[i], order[i] = at[js[i].ID], i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(place[a], place[b]) })
	for k := range order { // follow each cycle of the permutation
		if order[k] == k || order[k] < 0 {
			continue
		}
		held := js[k]
		dst := k
		for {
			src := order[dst]
			order[dst] = -1
			if src == k {
				js[dst] = held
				break
			}
			js[dst] = js[src]
			dst = src
		}
	}
}

// scanQueueJobs appends to js the jobs of ids, read by queueJobsSQL.
func (s *Store) scanQueueJobs(ctx context.Context, js []Job, dest []any, ids []int64) ([]Job, error) {
	rows, err := s.db.WithContext(ctx).Raw(s.queueJobsSQL, ids).Rows()
	if err != nil {
		return js, err
	}
	defer rows.Close()
	for rows.Next() {
		js = append(js, Job{})
		j := &js[len(js)-1]
		for i, f := range queueJobFields {
			dest[i] = f.col(j)
		}
		if err := rows.Scan(dest...); err != nil {
			return js, err
		}
	}
	return js, rows.Err()
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
