package models

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// AccountingDay is the GPU time one user's jobs in one team held and used
// on one UTC day, written once the day has closed
// (CloseAccountingDays), so that what was used stays known after the GPU
// history it was measured from is rolled up and pruned. Table
// accounting_days.
type AccountingDay struct {
	Day                 string  `gorm:"column:day;primaryKey;size:10"` // YYYY-MM-DD, UTC
	Team                string  `gorm:"column:team;primaryKey;size:64"`
	UserName            string  `gorm:"column:user_name;primaryKey;size:64"`
	AllocatedGPUSeconds float64 `gorm:"column:allocated_gpu_seconds;not null"`
	UsedGPUSeconds      float64 `gorm:"column:used_gpu_seconds;not null"`
	SampledGPUSeconds   float64 `gorm:"column:sampled_gpu_seconds;not null"`
	IdleGPUSeconds      float64 `gorm:"column:idle_gpu_seconds;not null"`
}

// TableName names AccountingDay's table.
func (AccountingDay) TableName() string { return "accounting_days" }

// AccountingClosedDay records that a day's accounting_days rows are
// written, and the idle threshold they were measured with. Table
// accounting_closed_days.
type AccountingClosedDay struct {
	Day          string    `gorm:"column:day;primaryKey;size:10"`
	IdleBelowPct float64   `gorm:"column:idle_below_pct;not null"`
	ClosedAt     time.Time `gorm:"column:closed_at;not null"`
}

// TableName names AccountingClosedDay's table.
func (AccountingClosedDay) TableName() string { return "accounting_closed_days" }

// dayOf is the UTC day holding t (accounting.DayOf).
func dayOf(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// dayFormat is how days are stored.
const dayFormat = time.DateOnly

// AccountingCloseLag is how long after midnight a day is closed: the
// last minute of GPU history is written a minute after it ends.
const AccountingCloseLag = 10 * time.Minute

// accountingRow is a run with its job, as the accounting query reads it.
type accountingRow struct {
	JobID       int64
	Team        string
	User        string `gorm:"column:user"`
	Sharing     bool
	GPUFraction float64
	Placement   string
	StartedAt   time.Time
	EndedAt     *time.Time
	State       string
	// ReclaimedAt and ReclaimedGPUSeconds: see Run.
	ReclaimedAt         *time.Time
	ReclaimedGPUSeconds float64
}

// AccountingRun is a run as the accounting measures it: the fields of
// accounting.Run (core/accounting), which corerows converts it to.
type AccountingRun struct {
	Job                 int64
	Team, User          string
	GPUs                []string
	Sharing             bool
	Fraction            float64
	Start               time.Time
	End                 *time.Time
	State               string
	ReclaimedAt         *time.Time
	ReclaimedGPUSeconds float64
}

// AccountingSample is a bucket of a GPU's history: the fields of
// accounting.Sample.
type AccountingSample struct {
	GPU   string // "node:index"
	Start time.Time
	Step  time.Duration
	Util  float64
}

// AccountingKey names whose GPU time a usage is: accounting.Key.
type AccountingKey struct {
	Team, User string
}

// AccountingUsage is GPU time in GPU-seconds: accounting.Usage.
type AccountingUsage struct {
	Allocated, Used, Sampled, IdleAllocated float64
}

// AccountingJob is a job as a report counts its outcome and wait:
// accounting.Job.
type AccountingJob struct {
	ID          int64
	Team, User  string
	SubmittedAt time.Time
	FirstStart  *time.Time
	State       string
	FinishedAt  *time.Time
}

// MeasureDays measures each UTC day in [from, to) from its runs and GPU
// history, as of now, by team and user, with idleBelow (0 to 1) the
// utilization under which an allocated GPU counts idle. The store keeps
// rows and measures nothing itself: corerows.MeasureDays is
// core/accounting's Measure over these rows.
type MeasureDays func(runs []AccountingRun, samples []AccountingSample, from, to, now time.Time, idleBelow float64) map[time.Time]map[AccountingKey]AccountingUsage

// accountingRuns returns the runs that held GPUs in [from, to) or ended
// in it.
func accountingRuns(tx *gorm.DB, from, to time.Time) ([]AccountingRun, error) {
	var rows []accountingRow
	err := tx.Table("runs").
		Select("runs.job_id, jobs.team, jobs."+quoteUser(tx)+" AS "+quoteUser(tx)+", jobs.sharing, jobs.gpu_fraction, runs.placement, runs.started_at, runs.ended_at, runs.state, runs.reclaimed_at, runs.reclaimed_gpu_seconds").
		Joins("JOIN jobs ON jobs.id = runs.job_id").
		Where("runs.started_at < ? AND (runs.ended_at IS NULL OR runs.ended_at >= ?)", to, from).
		Order("runs.id").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("runs from %s to %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	out := make([]AccountingRun, 0, len(rows))
	for _, r := range rows {
		var gpus []string
		for _, g := range strings.Split(r.Placement, ",") {
			if g != "" {
				gpus = append(gpus, g)
			}
		}
		out = append(out, AccountingRun{Job: r.JobID, Team: r.Team, User: r.User, GPUs: gpus,
			Sharing: r.Sharing || (r.GPUFraction > 0 && r.GPUFraction < 1), Fraction: r.GPUFraction,
			Start: r.StartedAt.UTC(), End: utcPtr(r.EndedAt), State: r.State,
			ReclaimedAt: utcPtr(r.ReclaimedAt), ReclaimedGPUSeconds: r.ReclaimedGPUSeconds})
	}
	return out, nil
}

// quoteUser is the jobs table's user column, quoted: a reserved word in
// PostgreSQL.
func quoteUser(*gorm.DB) string { return `"user"` }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// accountingSamples returns the GPU history buckets starting in
// [from, to), by "node:index".
func accountingSamples(tx *gorm.DB, from, to time.Time) ([]AccountingSample, error) {
	var rows []GPUHistory
	err := tx.Select("step, start, node, gpu_index, util_avg_pct").
		Where("step IN ? AND start >= ? AND start < ? AND samples > 0", []int{StepMinute, StepHour}, from.Unix(), to.Unix()).
		Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("GPU history from %s to %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	out := make([]AccountingSample, len(rows))
	for i, r := range rows {
		out[i] = AccountingSample{GPU: r.Node + ":" + strconv.Itoa(r.GPUIndex), Start: time.Unix(r.Start, 0).UTC(),
			Step: time.Duration(r.Step) * time.Second, Util: r.UtilAvgPct / 100}
	}
	return out, nil
}

// measureDay measures day d from its runs and its GPU history.
func measureDay(tx *gorm.DB, d, now time.Time, idleBelow float64, measure MeasureDays) (map[AccountingKey]AccountingUsage, error) {
	next := d.AddDate(0, 0, 1)
	runs, err := accountingRuns(tx, d, next)
	if err != nil {
		return nil, err
	}
	// A bucket that starts before midnight may reach into the day.
	samples, err := accountingSamples(tx, d.Add(-StepHour*time.Second), next)
	if err != nil {
		return nil, err
	}
	return measure(runs, samples, d, next, now, idleBelow)[d], nil
}

// Accounting is what the store knows of [from, to) for a report: each
// day's GPU time per team and user (closed days from accounting_days,
// the others measured from the GPU history now), and the jobs and runs
// whose outcomes and waits fall in it.
type Accounting struct {
	Days map[time.Time]map[AccountingKey]AccountingUsage
	Jobs []AccountingJob
	Runs []AccountingRun
}

// Accounting loads what a report of the UTC days [from, to) needs, as of
// now: runs in progress count up to now. idleBelow (0 to 1) is the
// utilization under which a GPU counts idle on days not closed yet, which
// measure measures.
func (s *Store) Accounting(ctx context.Context, from, to, now time.Time, idleBelow float64, measure MeasureDays) (*Accounting, error) {
	db := s.db.WithContext(ctx)
	out := &Accounting{Days: make(map[time.Time]map[AccountingKey]AccountingUsage)}
	runs, err := accountingRuns(db, from, to)
	if err != nil {
		return nil, err
	}
	out.Runs = runs
	var closed []AccountingDay
	if err := db.Where("day >= ? AND day < ?", from.Format(dayFormat), to.Format(dayFormat)).Find(&closed).Error; err != nil {
		return nil, fmt.Errorf("accounting days from %s: %w", from.Format(dayFormat), err)
	}
	var closedDays []string
	if err := db.Model(&AccountingClosedDay{}).Where("day >= ? AND day < ?", from.Format(dayFormat), to.Format(dayFormat)).
		Pluck("day", &closedDays).Error; err != nil {
		return nil, fmt.Errorf("closed accounting days from %s: %w", from.Format(dayFormat), err)
	}
	isClosed := make(map[string]bool, len(closedDays))
	for _, d := range closedDays {
		isClosed[d] = true
	}
	for _, r := range closed {
		d, err := time.Parse(dayFormat, r.Day)
		if err != nil {
			return nil, fmt.Errorf("accounting day %q: %w", r.Day, err)
		}
		m := out.Days[d]
		if m == nil {
			m = make(map[AccountingKey]AccountingUsage)
			out.Days[d] = m
		}
		m[AccountingKey{Team: r.Team, User: r.UserName}] = AccountingUsage{Allocated: r.AllocatedGPUSeconds,
			Used: r.UsedGPUSeconds, Sampled: r.SampledGPUSeconds, IdleAllocated: r.IdleGPUSeconds}
	}
	for d := from; d.Before(to) && d.Before(now); d = d.AddDate(0, 0, 1) {
		if isClosed[d.Format(dayFormat)] {
			continue
		}
		m, err := measureDay(db, d, now, idleBelow, measure)
		if err != nil {
			return nil, err
		}
		if len(m) > 0 {
			out.Days[d] = m
		}
	}
	var jobs []Job
	err = db.Select("id, team, "+quoteUser(db)+", submitted_at, started_at, state, finished_at").
		Where("(finished_at >= ? AND finished_at < ?) OR (started_at >= ? AND started_at < ?)", from, to, from, to).
		Order("id").Find(&jobs).Error
	if err != nil {
		return nil, fmt.Errorf("jobs from %s to %s: %w", from.Format(dayFormat), to.Format(dayFormat), err)
	}
	for _, j := range jobs {
		aj := AccountingJob{ID: j.ID, Team: j.Team, User: j.User, SubmittedAt: j.SubmittedAt.UTC(),
			FirstStart: utcPtr(j.StartedAt), State: string(j.State)}
		if j.State.Final() {
			aj.FinishedAt = utcPtr(j.FinishedAt)
		}
		out.Jobs = append(out.Jobs, aj)
	}
	return out, nil
}

// CloseAccountingDays writes the accounting_days rows of the days that
// have closed since the last one written (AccountingCloseLag after their
// midnight), at most max of them, oldest first, measuring each from its
// runs and GPU history with idleBelow (0 to 1) by measure. The first day
// it closes is the day of the first run. It returns how many days it
// closed.
func (s *Store) CloseAccountingDays(ctx context.Context, now time.Time, idleBelow float64, max int, measure MeasureDays) (int, error) {
	db := s.db.WithContext(ctx)
	var last AccountingClosedDay
	var next time.Time
	err := db.Order("day DESC").Limit(1).Find(&last).Error
	if err != nil {
		return 0, fmt.Errorf("last closed accounting day: %w", err)
	}
	if last.Day != "" {
		d, err := time.Parse(dayFormat, last.Day)
		if err != nil {
			return 0, fmt.Errorf("closed accounting day %q: %w", last.Day, err)
		}
		next = d.AddDate(0, 0, 1)
	} else {
		var first Run
		err := db.Order("started_at").Limit(1).Find(&first).Error
		if err != nil {
			return 0, fmt.Errorf("first run: %w", err)
		}
		if first.ID == 0 {
			return 0, nil
		}
		next = dayOf(first.StartedAt)
	}
	n := 0
	for ; n < max && !next.AddDate(0, 0, 1).Add(AccountingCloseLag).After(now); n++ {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		d := next
		err := db.Transaction(func(tx *gorm.DB) error {
			m, err := measureDay(tx, d, now, idleBelow, measure)
			if err != nil {
				return err
			}
			rows := make([]AccountingDay, 0, len(m))
			for k, u := range m {
				rows = append(rows, AccountingDay{Day: d.Format(dayFormat), Team: k.Team, UserName: k.User,
					AllocatedGPUSeconds: u.Allocated, UsedGPUSeconds: u.Used, SampledGPUSeconds: u.Sampled, IdleGPUSeconds: u.IdleAllocated})
			}
			if len(rows) > 0 {
				if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(&rows, s.rowsPerInsert()).Error; err != nil {
					return err
				}
			}
			mark := AccountingClosedDay{Day: d.Format(dayFormat), IdleBelowPct: idleBelow * 100, ClosedAt: now}
			return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&mark).Error
		})
		if err != nil {
			return n, fmt.Errorf("close accounting day %s: %w", d.Format(dayFormat), err)
		}
		next = d.AddDate(0, 0, 1)
	}
	return n, nil
}
