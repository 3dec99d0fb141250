package web

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// BenchmarkJobsPage measures the Jobs page (GET /jobs, its first page of
// 50, as an admin) and the API's list over 100,000 finished jobs, on
// SQLite and PostgreSQL: the newest page, a page deep in the list by its
// cursor, one team's, one state's, and a search (which reads the table).
//
//	go test -run '^$' -bench JobsPage -benchtime 50x ./web
func BenchmarkJobsPage(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchJobsPage(b, modelstest.SQLiteDSN(b)) })
	b.Run("postgres", func(b *testing.B) { benchJobsPage(b, modelstest.PostgresDSN(b)) })
}

func benchJobsPage(b *testing.B, dsn string) {
	ts := newTestServerOn(b, dsn)
	const n = 100_000
	seedJobs(b, dsn, n)
	deep := app.JobCursor('b', n/2)
	for _, bc := range []struct{ name, target string }{
		{"page/newest", "/jobs"},
		{"page/deep", "/jobs?cursor=" + deep},
		{"page/team", "/jobs?team=nlp"},
		{"page/team-deep", "/jobs?team=nlp&cursor=" + deep},
		{"page/state", "/jobs?state=failed"},
		{"page/search", "/jobs?q=seed%3D77"},
		{"api/newest-50", "/api/v1/jobs?scope=all&limit=50"},
		{"api/newest-1000", "/api/v1/jobs?scope=all&limit=1000"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				rec := ts.doAs(b, "admin", ts.sessions["admin"], http.MethodGet, bc.target, "")
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", bc.target, rec.Code, rec.Body)
				}
			}
		})
	}
}

// seedJobs stores n finished jobs over four teams straight into the
// database, in one transaction.
func seedJobs(b *testing.B, dsn string, n int) {
	b.Helper()
	db := modelstest.Gorm(b, dsn)
	teams := []string{"vision", "nlp", "speech", "rl"}
	at := time.Now().Add(-time.Duration(n) * time.Minute)
	err := db.Transaction(func(tx *gorm.DB) error {
		for from := 0; from < n; from += 1000 {
			js := make([]models.Job, 0, 1000)
			for i := from; i < min(n, from+1000); i++ {
				sub := at.Add(time.Duration(i) * time.Minute)
				fin := sub.Add(20 * time.Minute)
				j := models.Job{Name: fmt.Sprintf("train-%d", i), Team: teams[i%4], User: fmt.Sprintf("user%d", i%20), GPUs: 1 + i%4,
					SimDuration: 600, State: models.JobSucceeded, Reason: "exited 0", SubmittedAt: sub, StartedAt: &sub, FinishedAt: &fin,
					ExecutedS: 1200, AttainedService: float64(1200 * (1 + i%4))}
				if i%7 == 0 {
					j.Command, j.SimDuration = models.Strings{"python", "train.py", fmt.Sprintf("--seed=%d", i)}, 0
				}
				if i%97 == 0 {
					j.State, j.Reason = models.JobFailed, "exited 1"
				}
				js = append(js, j)
			}
			if err := tx.CreateInBatches(js, 250).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatalf("seed %d jobs: %v", n, err)
	}
	if db.Dialector.Name() == "postgres" {
		if err := db.Exec("ANALYZE jobs").Error; err != nil {
			b.Fatal(err)
		}
	}
}
