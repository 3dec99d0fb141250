package models

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"
)

// The jobs by team and state, kept by the database as jobs change
// (issue 33): /metrics, the cluster's figures and the history's samples
// counted every job of the table, a sequential scan that grew with the
// history (15 ms at 30,000 jobs on PostgreSQL). Triggers on jobs
// (migration 51) add a row to job_counts in the transaction of every
// change: +1 for a new job, -1 and +1 for a change of state or team, -1
// for a deleted job; whoever writes (this store, another replica, a
// script) keeps it true, and it commits or rolls back with the change.
// The rows only ever grow, so that concurrent changes never wait on one
// another (a counter per state updated in place would be a lock every
// start and end takes, in opposite orders: a deadlock). A read sums them
// and, when there are more than jobCountsCompactAt, folds them into one
// row per team and state (compactJobCounts).

// jobCountsCompactAt is how many rows of job_counts a read sums before
// it folds them: a few seconds of a busy cluster's changes.
const jobCountsCompactAt = 2000

// JobCount is how many jobs of a team are in a state.
type JobCount struct {
	Team  string
	State JobState
	N     int
}

// JobCounts counts every job by team and state, in that order, from the
// counts the database keeps (job_counts); a team and state of no job
// are left out.
func (s *Store) JobCounts(ctx context.Context) ([]JobCount, error) {
	var rows []struct {
		Team  string
		State JobState
		N     int
		Rows  int
	}
	err := s.db.WithContext(ctx).Raw("SELECT team, state, SUM(n) AS n, COUNT(*) AS rows FROM job_counts GROUP BY team, state").
		Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	out, kept := make([]JobCount, 0, len(rows)), 0
	for _, r := range rows {
		kept += r.Rows
		if r.N != 0 {
			out = append(out, JobCount{Team: r.Team, State: r.State, N: r.N})
		}
	}
	slices.SortFunc(out, func(a, b JobCount) int { return cmp.Or(cmp.Compare(a.Team, b.Team), cmp.Compare(a.State, b.State)) })
	if kept > s.compactAt() {
		if err := s.compactJobCounts(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// CountJobsByState returns how many jobs are in each state.
func (s *Store) CountJobsByState(ctx context.Context) (map[JobState]int, error) {
	counts, err := s.JobCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[JobState]int)
	for _, c := range counts {
		out[c.State] += c.N
	}
	return out, nil
}

func (s *Store) compactAt() int {
	if s.jobCountsCompactAt > 0 {
		return s.jobCountsCompactAt
	}
	return jobCountsCompactAt
}

// compactJobCounts folds job_counts into one row per team and state. It
// deletes the rows it sums (DELETE ... RETURNING) and writes their sums in
// one transaction: a row another transaction adds meanwhile is neither
// deleted nor summed, and two replicas folding at once each fold the
// rows they deleted.
func (s *Store) compactJobCounts(ctx context.Context) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var gone []JobCount
		if err := tx.Raw("DELETE FROM job_counts RETURNING team, state, n").Scan(&gone).Error; err != nil {
			return err
		}
		type key struct {
			team  string
			state JobState
		}
		sum := make(map[key]int)
		for _, g := range gone {
			sum[key{g.Team, g.State}] += g.N
		}
		folded := make([]map[string]any, 0, len(sum))
		for k, n := range sum {
			if n != 0 {
				folded = append(folded, map[string]any{"team": k.team, "state": string(k.state), "n": n})
			}
		}
		if len(folded) == 0 {
			return nil
		}
		return tx.Table("job_counts").CreateInBatches(folded, 200).Error
	})
	if err != nil {
		return fmt.Errorf("fold the job counts: %w", err)
	}
	return nil
}

// jobCountsTriggers is migration 51: job_counts, the triggers that keep
// it, and its first rows, counted from jobs.
func jobCountsTriggers(tx *gorm.DB) error {
	stmts := []string{`CREATE TABLE job_counts (team VARCHAR(64) NOT NULL, state VARCHAR(16) NOT NULL, n BIGINT NOT NULL)`}
	if tx.Dialector.Name() == "postgres" {
		stmts = append(stmts,
			`CREATE FUNCTION job_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO job_counts (team, state, n) VALUES (NEW.team, NEW.state, 1);
	ELSIF TG_OP = 'DELETE' THEN
		INSERT INTO job_counts (team, state, n) VALUES (OLD.team, OLD.state, -1);
	ELSE
		INSERT INTO job_counts (team, state, n) VALUES (OLD.team, OLD.state, -1), (NEW.team, NEW.state, 1);
	END IF;
	RETURN NULL;
END $$`,
			`CREATE TRIGGER job_counts_insert AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION job_counts_keep()`,
			`CREATE TRIGGER job_counts_delete AFTER DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION job_counts_keep()`,
			`CREATE TRIGGER job_counts_update AFTER UPDATE OF team, state ON jobs FOR EACH ROW
	WHEN (OLD.team IS DISTINCT FROM NEW.team OR OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION job_counts_keep()`)
	} else {
		stmts = append(stmts,
			`CREATE TRIGGER job_counts_insert AFTER INSERT ON jobs
BEGIN INSERT INTO job_counts (team, state, n) VALUES (NEW.team, NEW.state, 1); END`,
			`CREATE TRIGGER job_counts_delete AFTER DELETE ON jobs
BEGIN INSERT INTO job_counts (team, state, n) VALUES (OLD.team, OLD.state, -1); END`,
			`CREATE TRIGGER job_counts_update AFTER UPDATE OF team, state ON jobs
WHEN OLD.team IS NOT NEW.team OR OLD.state IS NOT NEW.state
BEGIN INSERT INTO job_counts (team, state, n) VALUES (OLD.team, OLD.state, -1), (NEW.team, NEW.state, 1); END`)
	}
	stmts = append(stmts, `INSERT INTO job_counts (team, state, n) SELECT team, state, COUNT(*) FROM jobs GROUP BY team, state`)
	for _, st := range stmts {
		if err := tx.Exec(st).Error; err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
	}
	return nil
}
