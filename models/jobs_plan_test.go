package models

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"
)

// seedFinishedJobs stores n finished jobs in batches, spread over four
// teams and twenty users, a few still queued: a long-lived cluster's jobs
// table, for plans and benchmarks.
func seedFinishedJobs(t testing.TB, s *Store, n int) {
	t.Helper()
	teams := []string{"vision", "nlp", "speech", "rl"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const batch = 1000
	tx := s.db.Begin()
	for from := 0; from < n; from += batch {
		js := make([]Job, 0, batch)
		for i := from; i < min(n, from+batch); i++ {
			sub := at.Add(time.Duration(i) * time.Minute)
			fin := sub.Add(20 * time.Minute)
			user := fmt.Sprintf("user%d", i%20)
			if i%1000 == 1 {
				user = "guest"
			}
			j := Job{Name: fmt.Sprintf("train-%d", i), Team: teams[i%4], User: user, GPUs: 1 + i%4,
				SimDuration: 600, State: JobSucceeded, Reason: "exited 0", SubmittedAt: sub, StartedAt: &sub, FinishedAt: &fin,
				ExecutedS: 1200, AttainedService: float64(1200 * (1 + i%4))}
			if i%7 == 0 {
				j.Command, j.SimDuration = Strings{"python", "train.py", fmt.Sprintf("--seed=%d", i)}, 0
			}
			if i%500 == 0 {
				j.State, j.StartedAt, j.FinishedAt, j.Reason = JobQueued, nil, nil, "waiting"
			}
			js = append(js, j)
		}
		// Ten rows a statement on SQLite: its driver binds each of a
		// statement's parameters by a search through all of them, so 250
		// rows (10,000 parameters) took 15 s where 10 take 1 s.
		// PostgreSQL binds them in linear time: fewer round trips.
		perStatement := 10
		if s.db.Dialector.Name() == "postgres" {
			perStatement = 200
		}
		if err := tx.CreateInBatches(js, perStatement).Error; err != nil {
			tx.Rollback()
			t.Fatalf("seed jobs: %v", err)
		}
	}
	if err := tx.Commit().Error; err != nil {
		t.Fatalf("seed jobs: %v", err)
	}
	if s.db.Dialector.Name() == "postgres" {
		if err := s.db.Exec("ANALYZE jobs").Error; err != nil {
			t.Fatal(err)
		}
	}
}

// TestListJobsPlansUseIndexes checks, on SQLite and PostgreSQL, that the
// jobs list reads a page through an index, in the list's order, rather
// than reading every matching job and sorting them.
func TestListJobsPlansUseIndexes(t *testing.T) {
	t.Parallel()
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openTestStore(t, dsn)
		// PostgreSQL plans by the statistics ANALYZE gathers, so its table
		// is a long-lived cluster's. SQLite keeps none (no ANALYZE, no
		// sqlite_stat1: checked here) and plans by its rules alone, the same
		// for any number of rows: a tenth of them, each kind of row still
		// there (guest, queued, commands), takes a tenth of the time.
		n := 10_000
		if s.db.Dialector.Name() != "postgres" {
			n = 1_000
			var stats int64
			if err := s.db.Raw("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'sqlite_stat%'").Scan(&stats).Error; err != nil || stats != 0 {
				t.Fatalf("SQLite statistics tables: %d, %v; want none, so that its plans do not depend on the rows", stats, err)
			}
		}
		seedFinishedJobs(t, s, n)
		queue := 0
		for _, tc := range []struct {
			name string
			f    JobFilter
			// byIndex: the filter's own index, not the primary key's
			// (SQLite always; PostgreSQL where the filter is selective)
			byIndex bool
			scan    bool // a search reads the table: no index holds substrings
		}{
			{"newest", JobFilter{Limit: 51}, false, false},
			{"next page", JobFilter{Before: 6_345, Limit: 51}, false, false},
			{"previous page", JobFilter{After: 6_345, Limit: 51}, false, false},
			{"team", JobFilter{Team: "nlp", Limit: 51}, true, false},
			{"team, next page", JobFilter{Team: "nlp", Before: 9_000, Limit: 51}, true, false},
			{"user", JobFilter{User: "user7", Limit: 51}, true, false},
			{"a rare user", JobFilter{User: "guest", Limit: 51}, true, false},
			{"state", JobFilter{States: []JobState{JobQueued}, Limit: 51}, true, false},
			{"user and state", JobFilter{User: "user7", States: []JobState{JobSucceeded}, Before: 5_000, Limit: 51}, false, false},
			{"queue and kind", JobFilter{Queue: &queue, Kind: KindCommand, Limit: 51}, false, false},
			{"search", JobFilter{Query: "seed=77", Limit: 51}, false, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				plan := explainListJobs(t, s, tc.f)
				t.Logf("plan:\n%s", plan)
				if tc.scan {
					return
				}
				if strings.Contains(plan, "TEMP B-TREE") || sortsMany(plan) {
					t.Errorf("the plan sorts the matching jobs:\n%s", plan)
				}
				if strings.Contains(plan, "Seq Scan") {
					t.Errorf("the plan reads the whole table:\n%s", plan)
				}
				pg := s.db.Dialector.Name() == "postgres"
				selective := tc.f.User == "guest" || len(tc.f.States) > 0
				if tc.byIndex && (!pg || selective) && !strings.Contains(plan, "idx_jobs_") {
					t.Errorf("the plan does not use the filter's index:\n%s", plan)
				}
			})
		}
	})
}

// TestJCTReadsPlans checks, on SQLite and PostgreSQL, that the JCT
// window's reads (jctview.go) search the index of their time, finished_at
// for a whole window and updated_at for the jobs changed since the last
// read, rather than every finished job by the index on state.
func TestJCTReadsPlans(t *testing.T) {
	t.Parallel()
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openTestStore(t, dsn)
		seedFinishedJobs(t, s, 2_000) // each minute from 2026-01-01 on
		last := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(2_000 * time.Minute)
		for _, tc := range []struct {
			name, where string
			arg         time.Time
			index       string
		}{
			{"whole window", "finished_at >= ?", last.Add(-time.Hour), "idx_jobs_finished_at"},
			{"changed since", "updated_at >= ?", time.Now().Add(time.Hour), "idx_jobs_updated_at"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				plan := explain(t, s, func(tx *gorm.DB) *gorm.DB {
					var rows []jctRow
					return jctQuery(tx, tc.where, tc.arg).Scan(&rows)
				})
				t.Logf("plan:\n%s", plan)
				if !strings.Contains(plan, tc.index) || strings.Contains(plan, "Seq Scan") {
					t.Errorf("the plan does not search %s:\n%s", tc.index, plan)
				}
			})
		}
	})
}

// sortsMany reports whether a PostgreSQL plan sorts more than a few
// hundred rows: sorting the few jobs of a rare user is cheaper than
// walking an index, sorting a team's thousands is not.
func sortsMany(plan string) bool {
	for _, line := range strings.Split(plan, "\n") {
		if !strings.Contains(line, "Sort  (") {
			continue
		}
		var rows int
		if i := strings.Index(line, "rows="); i >= 0 {
			fmt.Sscanf(line[i:], "rows=%d", &rows)
		}
		if rows > 500 {
			return true
		}
	}
	return false
}

// explainListJobs is the database's plan for ListJobs(f).
func explainListJobs(t *testing.T, s *Store, f JobFilter) string {
	t.Helper()
	return explain(t, s, func(tx *gorm.DB) *gorm.DB {
		var js []Job
		return listJobsQuery(tx, f).Find(&js)
	})
}

// explain is the database's plan for the statement query makes.
func explain(t *testing.T, s *Store, query func(tx *gorm.DB) *gorm.DB) string {
	t.Helper()
	sql := s.db.ToSQL(query)
	explain := "EXPLAIN "
	if s.db.Dialector.Name() != "postgres" {
		explain = "EXPLAIN QUERY PLAN "
	}
	rows, err := s.db.WithContext(context.Background()).Raw(explain + sql).Rows()
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, vals[len(vals)-1])
	}
	return b.String()
}

// TestListJobsFilters checks the list's filters and its two cursors on
// SQLite and PostgreSQL alike: search ignores case and takes % and _
// literally, #N is job N alone, kind tells commands from simulations.
func TestListJobsFilters(t *testing.T) {
	t.Parallel()
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openTestStore(t, dsn)
		ctx := context.Background()
		var ids []int64
		for i, j := range []Job{
			{Name: "ResNet-50", Command: Strings{"python", "train.py"}},
			{Name: "sweep_50%"},
			{Name: "bert", Command: Strings{"python", "finetune.py", "--lr=0.1"}},
			{Name: "sweepx50"},
		} {
			j.Team, j.User, j.GPUs, j.SubmittedAt, j.QueueIndex = "vision", "alice", 1, time.Now(), i%2
			if err := s.CreateJob(ctx, &j); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		queue1 := 1
		for _, tc := range []struct {
			name string
			f    JobFilter
			want []int64
		}{
			{"search ignores case", JobFilter{Query: "RESNET"}, []int64{ids[0]}},
			{"search the command", JobFilter{Query: "lr=0.1"}, []int64{ids[2]}},
			{"% is a percent sign", JobFilter{Query: "50%"}, []int64{ids[1]}},
			{"_ is an underscore", JobFilter{Query: "sweep_"}, []int64{ids[1]}},
			{"#N is job N", JobFilter{Query: fmt.Sprintf("#%d", ids[3])}, []int64{ids[3]}},
			{"commands", JobFilter{Kind: KindCommand}, []int64{ids[2], ids[0]}},
			{"simulations", JobFilter{Kind: KindSim}, []int64{ids[3], ids[1]}},
			{"queue", JobFilter{Queue: &queue1}, []int64{ids[3], ids[1]}},
			{"before", JobFilter{Before: ids[2], Limit: 1}, []int64{ids[1]}},
			{"after, newest first", JobFilter{After: ids[0], Limit: 2}, []int64{ids[2], ids[1]}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				js, err := s.ListJobs(ctx, tc.f)
				if err != nil {
					t.Fatal(err)
				}
				var got []int64
				for _, j := range js {
					got = append(got, j.ID)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("got %v, want %v", got, tc.want)
				}
			})
		}
	})
}

// TestQueueReadsPlans checks, on SQLite and PostgreSQL, that what GET
// /api/v1/queues and the other queue reads ask of the jobs table at
// every read searches an index, as at 100,000 finished jobs (issue 33):
// the running jobs by state, the rows changed since the last read by
// updated_at, the sweep's step by a range of IDs, and a page's jobs
// (QueueJobsByID) by their IDs; none reads the table whole.
func TestQueueReadsPlans(t *testing.T) {
	t.Parallel()
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		s := openTestStore(t, dsn)
		n := 10_000 // PostgreSQL plans by the statistics of a long-lived table
		if s.db.Dialector.Name() != "postgres" {
			n = 1_000 // SQLite by its rules alone (TestListJobsPlansUseIndexes)
		}
		seedFinishedJobs(t, s, n)
		sql, err := queueJobsQuery(s.db)
		if err != nil {
			t.Fatal(err)
		}
		page := make([]int64, 0, 200)
		for id := int64(n / 2); len(page) < cap(page); id += 3 {
			page = append(page, id)
		}
		for _, tc := range []struct {
			name  string
			query func(tx *gorm.DB) *gorm.DB
		}{
			{"running jobs", func(tx *gorm.DB) *gorm.DB {
				var js []Job
				return tx.Where("state = ?", JobRunning).Order("id").Find(&js)
			}},
			{"rows changed since", func(tx *gorm.DB) *gorm.DB {
				var ids []int64
				return tx.Model(&Job{}).Where("updated_at >= ?", time.Now().Add(time.Hour)).Pluck("id", &ids)
			}},
			{"a step of the sweep", func(tx *gorm.DB) *gorm.DB {
				var ids []int64
				return tx.Model(&Job{}).Where("id > ? AND id <= ? AND state IN ?", n/2, n/2+queueSweepIDs, UnfinishedStates).Pluck("id", &ids)
			}},
			{"a page's jobs", func(tx *gorm.DB) *gorm.DB {
				var js []Job
				return tx.Raw(sql, page).Scan(&js)
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				plan := explain(t, s, tc.query)
				t.Logf("plan:\n%s", plan)
				if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "SCAN jobs") { // SQLite: SEARCH, not SCAN
					t.Errorf("the plan reads the whole table:\n%s", plan)
				}
			})
		}
	})
}
