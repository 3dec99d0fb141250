package models_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestSetReasonsInBatches sets the reasons of more jobs than one statement
// takes: every waiting job gets its own, a running job keeps the reason it
// had, one too long for the column is cut, and the writes are counted.
func TestSetReasonsInBatches(t *testing.T) {
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
			t.Fatal(err)
		}
		var js []*models.Job
		for i := range 1203 {
			js = append(js, &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 10,
				SubmittedAt: t0.Add(time.Duration(i) * time.Second)})
		}
		if err := s.CreateJobs(ctx, js); err != nil {
			t.Fatal(err)
		}
		running := js[700].ID
		if _, err := s.MarkStarted(ctx, running, []string{"n0:0"}, t0); err != nil {
			t.Fatal(err)
		}
		writes := s.Writes()["wait_reason"]
		reasons := make(map[int64]string, len(js))
		for _, j := range js {
			reasons[j.ID] = fmt.Sprintf("needs 1 GPU; 0 free; %d jobs ahead in queue 0", j.ID-1)
		}
		long := js[3].ID
		reasons[long] = strings.Repeat("é", 400) // 800 bytes
		if err := s.SetReasons(ctx, reasons); err != nil {
			t.Fatal(err)
		}
		if got := s.Writes()["wait_reason"] - writes; got != int64(len(reasons)) {
			t.Errorf("wait_reason writes %d, want %d", got, len(reasons))
		}
		for _, j := range js {
			got, err := s.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			switch want := reasons[j.ID]; j.ID {
			case running:
				if got.Reason == want {
					t.Errorf("running job %d took the reason %q", j.ID, got.Reason)
				}
			case long:
				if got.Reason != strings.Repeat("é", 256) {
					t.Errorf("long reason stored as %d bytes, want 512", len(got.Reason))
				}
			default:
				if got.Reason != want {
					t.Fatalf("job %d reason %q, want %q", j.ID, got.Reason, want)
				}
			}
		}
	})
}
