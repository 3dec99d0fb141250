package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/enginestore"
	"github.com/gpuportal/gpuportal/models"
)

// outAfterInsert is a store whose database goes out just after it has
// stored a job: every read the answer makes then fails, as unavailable,
// until the test brings it back.
type outAfterInsert struct {
	*models.Store
	out atomic.Bool
}

var errOut = fmt.Errorf("the database went out after the insert: %w", models.ErrUnavailable)

func (s *outAfterInsert) CreateJob(ctx context.Context, j *models.Job) error {
	err := s.Store.CreateJob(ctx, j)
	if err == nil {
		s.out.Store(true)
	}
	return err
}

func (s *outAfterInsert) JobByIdempotencyKey(ctx context.Context, user, key string) (*models.Job, error) {
	if s.out.Load() {
		return nil, errOut
	}
	return s.Store.JobByIdempotencyKey(ctx, user, key)
}

func (s *outAfterInsert) LatestForecastsOf(ctx context.Context, ids []int64) (map[int64]models.Forecast, error) {
	if s.out.Load() {
		return nil, errOut
	}
	return s.Store.LatestForecastsOf(ctx, ids)
}

func (s *outAfterInsert) RunningJobs(ctx context.Context) ([]models.Job, error) {
	if s.out.Load() {
		return nil, errOut
	}
	return s.Store.RunningJobs(ctx)
}

func (s *outAfterInsert) Teams(ctx context.Context) ([]models.Team, error) {
	if s.out.Load() {
		return nil, errOut
	}
	return s.Store.Teams(ctx)
}

// TestSubmitStoredAnswerUnreadable (issue 32): the database goes out
// between a submission's insert and the reads of its answer. The job is
// stored, so the client gets 201 with the job's ID (the short job when
// the answer's figures cannot be read), never an error it would retry
// into a second job; a retry with the same Idempotency-Key is refused
// with 503 while the database is out, and returns the same job, not a
// second one, once it is back. On a follower the answer reads the
// job's start forecast from the store; on the leader it reads nothing
// of a queued job after the insert, and is whole.
func TestSubmitStoredAnswerUnreadable(t *testing.T) {
	tests := []struct {
		name      string
		leader    bool
		wantShort bool // the answer lacks the figures the store could not give
	}{
		{"follower: the forecast cannot be read", false, true},
		{"leader: nothing read after the insert", true, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t)
			store := &outAfterInsert{Store: ts.store}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			eng := ts.engine
			if !tc.leader {
				sc, err := sched.New(sched.Config{Policy: "fifo"})
				if err != nil {
					t.Fatal(err)
				}
				if eng, err = engine.New(engine.Config{Store: enginestore.New(ts.store), Scheduler: sc, Logger: quiet}); err != nil {
					t.Fatal(err)
				}
				eng.SetFollower()
			}
			leader := func() bool { return tc.leader }
			srv, err := New(Config{App: app.New(app.Config{Store: store, Engine: eng, Logger: quiet, Leader: leader}),
				Telemetry: telemetry.New(time.Minute, 10), Logger: quiet, Leader: leader})
			if err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprint("retry-", i)
			submit := func() (int, http.Header, map[string]any) {
				t.Helper()
				req := httptest.NewRequest(http.MethodPost, "/api/v1/jobs",
					strings.NewReader(`{"name":"outage","team":"vision","gpus":1,"sim":{"duration_s":60}}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+ts.tokens["alice"])
				req.Header.Set("Idempotency-Key", key)
				rec := httptest.NewRecorder()
				srv.Handler().ServeHTTP(rec, req)
				var body map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Fatalf("answer %d %q: %v", rec.Code, rec.Body.String(), err)
				}
				return rec.Code, rec.Header(), body
			}

			code, hdr, first := submit()
			id, _ := first["id"].(float64)
			if code != http.StatusCreated || id == 0 {
				t.Fatalf("submission: %d %v; want 201 with the job's ID", code, first)
			}
			if want := fmt.Sprintf("/api/v1/jobs/%d", int64(id)); hdr.Get("Location") != want {
				t.Errorf("Location %q, want %q", hdr.Get("Location"), want)
			}
			if _, whole := first["usage"]; whole == tc.wantShort {
				t.Errorf("answer %v: with its usage %v, want %v", first, whole, !tc.wantShort)
			}
			if first["state"] != "queued" || first["name"] != "outage" {
				t.Errorf("answer %v, want the queued job named outage", first)
			}

			if code, _, body := submit(); code != http.StatusServiceUnavailable {
				t.Errorf("retry while the database is out: %d %v, want 503", code, body)
			}
			store.out.Store(false)
			code, hdr, again := submit()
			if code != http.StatusCreated || again["id"] != first["id"] || hdr.Get("Idempotent-Replayed") != "true" {
				t.Errorf("retry once the database is back: %d %v (replayed %q); want 201 with job %v again",
					code, again, hdr.Get("Idempotent-Replayed"), first["id"])
			}
			jobs, err := ts.store.ListJobs(context.Background(), models.JobFilter{User: "alice"})
			if err != nil || len(jobs) != 1 {
				t.Errorf("alice has %d jobs (%v), want the one", len(jobs), err)
			}
		})
	}
}
