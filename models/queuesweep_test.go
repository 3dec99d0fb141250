package models

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestQueueSweepPutsRight changes jobs behind the queue view's back, as
// no read of changed rows can see (their updated_at set an hour back: a
// clock far off), and checks that the sweep (queueview.go) puts the kept
// rows right within a sweep's steps, on 2,500 queued jobs.
func TestQueueSweepPutsRight(t *testing.T) {
	t.Parallel()
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		at := time.Now().Add(-time.Hour)
		js := make([]Job, 2500)
		for i := range js {
			js[i] = Job{Name: fmt.Sprintf("j%d", i), Team: "vision", User: "alice", GPUs: 1, SimDuration: 10, State: JobQueued, SubmittedAt: at}
		}
		// Ten rows a statement on SQLite, whose driver binds a statement's
		// parameters in time that grows with the square of their number
		// (250 rows a statement: over 10 minutes under -race on a loaded
		// machine); more on PostgreSQL, which binds them in linear time.
		perStatement := 10
		if s.db.Dialector.Name() == "postgres" {
			perStatement = 250
		}
		if err := s.db.CreateInBatches(js, perStatement).Error; err != nil {
			t.Fatal(err)
		}
		if rows, err := s.QueueRows(ctx); err != nil || len(rows) != 2500 {
			t.Fatalf("%d rows, %v; want 2,500", len(rows), err)
		}
		for _, stmt := range []string{
			"UPDATE jobs SET state = 'cancelled', updated_at = ? WHERE id IN (10, 1500, 2400)",
			"UPDATE jobs SET queue_index = 1, updated_at = ? WHERE id = 700",
			"DELETE FROM jobs WHERE id = 2000 AND updated_at > ?",
		} {
			if err := s.db.Exec(stmt, at).Error; err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		late := Job{Name: "late", Team: "nlp", User: "bob", GPUs: 1, SimDuration: 10, State: JobQueued, SubmittedAt: at, UpdatedAt: at}
		if err := s.db.Create(&late).Error; err != nil {
			t.Fatal(err)
		}
		if err := s.db.Exec("UPDATE jobs SET updated_at = ? WHERE id = ?", at, late.ID).Error; err != nil {
			t.Fatal(err)
		}
		var want []QueueRow
		if want, err = s.readQueueRows(ctx, 0, "state IN ?", UnfinishedStates); err != nil {
			t.Fatal(err)
		}
		steps := 0
		for ; steps < 10; steps++ {
			s.queues.mu.Lock()
			s.queues.sweptAt = time.Time{} // a second has passed
			s.queues.mu.Unlock()
			got, err := s.QueueRows(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if slices.EqualFunc(got, want, func(a, b QueueRow) bool { return sameQueueRow(&a, &b) }) {
				break
			}
		}
		if steps == 10 {
			t.Fatalf("the kept rows still differ from a whole read after 10 steps of the sweep")
		}
		t.Logf("put right in %d steps", steps+1)
	})
}
