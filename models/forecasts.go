package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Forecast is one forecast of a job's start, kept to measure forecasts
// against the starts that followed (the engine's ForecastRecord, turned
// into rows by enginestore): a job's first forecast, and one at each
// checkpoint of its wait.
type Forecast struct {
	ID     int64     `gorm:"primaryKey"`
	JobID  int64     `gorm:"uniqueIndex:idx_forecasts_job_kind,priority:1;not null"`
	Kind   string    `gorm:"uniqueIndex:idx_forecasts_job_kind,priority:2;size:16;not null"`
	MadeAt time.Time `gorm:"index;not null"`
	State  string    `gorm:"size:16;not null"`
	// Earliest, Likely and Latest bound the start (forecast.Forecast);
	// null where the forecast has none.
	Earliest *time.Time
	Likely   *time.Time
	Latest   *time.Time
	Reason   string `gorm:"size:512"`
}

// ForecastKindLatest is the kind of a waiting job's latest forecast, which
// the leader replaces as it changes, so that follower replicas (which
// run no engine) show it. It is not measured against starts: the first
// and checkpoint kinds are.
const ForecastKindLatest = "latest"

// SetLatestForecasts stores rows as their jobs' latest forecasts
// (ForecastKindLatest, whatever their Kind), replacing those stored.
func (s *Store) SetLatestForecasts(ctx context.Context, rows []Forecast) error {
	if len(rows) == 0 {
		return nil
	}
	for i := range rows {
		rows[i].ID = 0
		rows[i].Kind = ForecastKindLatest
		rows[i].Reason = truncate(rows[i].Reason, 512)
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "job_id"}, {Name: "kind"}},
		DoUpdates: clause.AssignmentColumns([]string{"made_at", "state", "earliest", "likely", "latest", "reason"}),
	}).CreateInBatches(rows, s.rowsPerInsert()).Error
	if err != nil {
		return fmt.Errorf("store %d latest forecasts: %w", len(rows), err)
	}
	return nil
}

// LatestForecasts returns the latest forecasts (ForecastKindLatest) of
// the jobs that wait, by job.
func (s *Store) LatestForecasts(ctx context.Context) (map[int64]Forecast, error) {
	var fs []Forecast
	err := s.db.WithContext(ctx).Where("kind = ?", ForecastKindLatest).
		Where("job_id IN (?)", s.db.Model(&Job{}).Select("id").Where("state IN ?", []JobState{JobQueued, JobPreempted})).
		Find(&fs).Error
	if err != nil {
		return nil, fmt.Errorf("latest forecasts: %w", err)
	}
	out := make(map[int64]Forecast, len(fs))
	for _, f := range fs {
		out[f.JobID] = f
	}
	return out, nil
}

// LatestForecastsOf returns the latest forecasts (ForecastKindLatest)
// of the jobs ids that have one, by job: what one job's or one page's
// figures need, read without the rest of the queue. Unlike
// LatestForecasts it does not ask whether the jobs still wait: its
// caller knows.
func (s *Store) LatestForecastsOf(ctx context.Context, ids []int64) (map[int64]Forecast, error) {
	out := make(map[int64]Forecast, len(ids))
	for from := 0; from < len(ids); from += forecastIDsPerQuery {
		part := ids[from:min(len(ids), from+forecastIDsPerQuery)]
		var fs []Forecast
		if err := s.db.WithContext(ctx).Where("kind = ? AND job_id IN ?", ForecastKindLatest, part).Find(&fs).Error; err != nil {
			return nil, fmt.Errorf("latest forecasts of %d jobs: %w", len(ids), err)
		}
		for _, f := range fs {
			out[f.JobID] = f
		}
	}
	return out, nil
}

// forecastIDsPerQuery bounds the job IDs one query of LatestForecastsOf
// binds, well within SQLite's and PostgreSQL's limits on parameters.
const forecastIDsPerQuery = 500

// RunTime is how long a finished job ran in all, with who ran what: the
// fields of forecast.Sample, which enginestore converts it to.
type RunTime struct {
	User, Team, Model string
	RunS              float64
	LimitS            float64 // its time limit; 0: none
	GPUs              int     // the GPUs it asked for
}

// FinishedRunTimes returns, for up to limit jobs that finished most
// recently after running, who ran what, for how long in all and under
// what time limit: what
// forecasts draw run times from. Failed and cancelled jobs count: they
// freed their GPUs all the same.
func (s *Store) FinishedRunTimes(ctx context.Context, limit int) ([]RunTime, error) {
	var js []Job
	err := s.db.WithContext(ctx).Select("user", "team", "model", "executed_s", "time_limit_s", "gp_us").
		Where("state IN ? AND executed_s > 0", []JobState{JobSucceeded, JobFailed, JobCancelled}).
		Order("finished_at DESC, id DESC").Limit(limit).Find(&js).Error
	if err != nil {
		return nil, fmt.Errorf("finished run times: %w", err)
	}
	out := make([]RunTime, len(js))
	for i, j := range js {
		out[i] = RunTime{User: j.User, Team: j.Team, Model: j.Model, RunS: j.ExecutedS, LimitS: float64(j.TimeLimitS), GPUs: j.GPUs}
	}
	return out, nil
}

// SubmittedSince returns up to limit jobs submitted since then, newest
// first: what forecasts expect arrivals to be like.
func (s *Store) SubmittedSince(ctx context.Context, since time.Time, limit int) ([]Job, error) {
	var js []Job
	err := s.db.WithContext(ctx).Where("submitted_at >= ?", since).Order("submitted_at DESC, id DESC").Limit(limit).Find(&js).Error
	if err != nil {
		return nil, fmt.Errorf("recent submissions: %w", err)
	}
	return js, nil
}

// AddForecasts stores forecast rows (their reasons cut to 512 bytes); one
// of a kind the job already has is left as it was.
func (s *Store) AddForecasts(ctx context.Context, rows []Forecast) error {
	if len(rows) == 0 {
		return nil
	}
	for i := range rows {
		rows[i].Reason = truncate(rows[i].Reason, 512)
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, s.rowsPerInsert()).Error
	if err != nil {
		return fmt.Errorf("record %d forecasts: %w", len(rows), err)
	}
	return nil
}

// ForecastOutcome is a forecast set against the start that followed, in
// seconds since 1970: the fields of forecast.Outcome, which the readers
// convert it to.
type ForecastOutcome struct {
	State                    string
	Earliest, Likely, Latest float64
	MadeAt, Start            float64
}

// ForecastOutcomes returns the most recent forecasts of kind (any kind
// when empty), up to limit, whose job has started since, each set against
// that start: the first start at or after the forecast. Unknown forecasts
// are among them: forecast.Calibrate counts them apart.
func (s *Store) ForecastOutcomes(ctx context.Context, kind string, limit int) ([]ForecastOutcome, error) {
	var fs []Forecast
	q := s.db.WithContext(ctx)
	if kind != "" {
		q = q.Where("kind = ?", kind)
	} else {
		q = q.Where("kind <> ?", ForecastKindLatest)
	}
	// Forecasts of jobs that have started at least once: the others wait
	// still (or ended without a start) and have nothing to compare with.
	// The database keeps which those are (forecasts.started,
	// forecastsStarted) and indexes them by made_at: at 10,000 queued,
	// the waiting jobs' forecasts are the most recent ones, which a
	// search of the runs for each read through (25 ms on PostgreSQL for
	// each view of the Queues page, issue 33).
	q = q.Where("started")
	if err := q.Order("made_at DESC, id DESC").Limit(limit).Find(&fs).Error; err != nil {
		return nil, fmt.Errorf("forecast outcomes: %w", err)
	}
	if len(fs) == 0 {
		return nil, nil
	}
	ids := make([]int64, 0, len(fs))
	seen := make(map[int64]bool, len(fs))
	for _, f := range fs {
		if !seen[f.JobID] {
			seen[f.JobID] = true
			ids = append(ids, f.JobID)
		}
	}
	var runs []Run
	for from := 0; from < len(ids); from += 500 {
		var part []Run
		to := min(from+500, len(ids))
		if err := s.db.WithContext(ctx).Select("job_id", "run", "started_at").Where("job_id IN ?", ids[from:to]).
			Order("job_id, run").Find(&part).Error; err != nil {
			return nil, fmt.Errorf("forecast outcomes: runs: %w", err)
		}
		runs = append(runs, part...)
	}
	starts := make(map[int64][]time.Time, len(ids))
	for _, r := range runs {
		starts[r.JobID] = append(starts[r.JobID], r.StartedAt)
	}
	out := make([]ForecastOutcome, 0, len(fs))
	for _, f := range fs {
		var start time.Time
		for _, at := range starts[f.JobID] {
			if !at.Before(f.MadeAt) {
				start = at
				break
			}
		}
		if start.IsZero() {
			continue
		}
		out = append(out, ForecastOutcome{State: f.State, Earliest: unixOf(f.Earliest), Likely: unixOf(f.Likely),
			Latest: unixOf(f.Latest), MadeAt: unixOf(&f.MadeAt), Start: unixOf(&start)})
	}
	return out, nil
}

// unixOf is t in seconds since 1970, 0 for none.
func unixOf(t *time.Time) float64 {
	if t == nil || t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// truncate cuts s to at most n bytes, on a character's boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// forecastsStarted is migration 46: forecasts.started says whether the
// forecast's job has a run (forecasts other than the latest, which are
// not measured), kept by the database whoever writes: a run's insert
// marks its job's forecasts, a forecast's insert looks its job's runs up;
// and a partial index of the started forecasts by made_at, which
// ForecastOutcomes reads newest first, as far as its limit, whatever the
// number of waiting jobs. Runs are never deleted.
func forecastsStarted(tx *gorm.DB) error {
	stmts := []string{
		`ALTER TABLE forecasts ADD COLUMN started BOOLEAN NOT NULL DEFAULT false`,
		`UPDATE forecasts SET started = true WHERE kind <> 'latest' AND job_id IN (SELECT job_id FROM runs)`,
	}
	if tx.Dialector.Name() == "postgres" {
		stmts = append(stmts,
			`CREATE FUNCTION forecasts_started_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.started := EXISTS (SELECT 1 FROM runs WHERE runs.job_id = NEW.job_id);
	RETURN NEW;
END $$`,
			`CREATE TRIGGER forecasts_started_insert BEFORE INSERT ON forecasts FOR EACH ROW
	WHEN (NEW.kind <> 'latest') EXECUTE FUNCTION forecasts_started_insert()`,
			`CREATE FUNCTION forecasts_started_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE forecasts SET started = true WHERE job_id = NEW.job_id AND kind <> 'latest' AND NOT started;
	RETURN NULL;
END $$`,
			`CREATE TRIGGER forecasts_started_run AFTER INSERT ON runs FOR EACH ROW EXECUTE FUNCTION forecasts_started_run()`)
	} else {
		stmts = append(stmts,
			`CREATE TRIGGER forecasts_started_insert AFTER INSERT ON forecasts
WHEN NEW.kind <> 'latest' AND EXISTS (SELECT 1 FROM runs WHERE runs.job_id = NEW.job_id)
BEGIN UPDATE forecasts SET started = true WHERE id = NEW.id; END`,
			`CREATE TRIGGER forecasts_started_run AFTER INSERT ON runs
BEGIN UPDATE forecasts SET started = true WHERE job_id = NEW.job_id AND kind <> 'latest' AND NOT started; END`)
	}
	stmts = append(stmts, `CREATE INDEX idx_forecasts_started ON forecasts (made_at DESC, id DESC) WHERE started`)
	for _, st := range stmts {
		if err := tx.Exec(st).Error; err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
	}
	return nil
}
