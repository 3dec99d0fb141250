package app

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestMomentFigures: every converter reads the same figures from one
// moment: service including the run in progress, GPUs held by share,
// borrowed only beyond a team's guarantee.
func TestMomentFigures(t *testing.T) {
	now := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	ago := func(s int) *time.Time { t := now.Add(-time.Duration(s) * time.Second); return &t }
	jobs := []models.Job{
		// A whole 2-GPU job in its second run: 10 s before, 30 s now.
		{ID: 1, Team: "vision", GPUs: 2, State: job.Running, Placement: models.Strings{"n:0", "n:1"},
			LastStartAt: ago(30), ExecutedS: 10, AttainedService: 20},
		// Three sharing jobs on one GPU.
		{ID: 2, Team: "vision", GPUs: 1, State: job.Running, Sharing: true, Placement: models.Strings{"n:2"}, LastStartAt: ago(5)},
		{ID: 3, Team: "nlp", GPUs: 1, State: job.Running, Sharing: true, Placement: models.Strings{"n:2"}, LastStartAt: ago(5)},
		{ID: 4, Team: "nlp", GPUs: 1, State: job.Running, Sharing: true, GPUFraction: 0.25, Placement: models.Strings{"n:2"}, LastStartAt: ago(5)},
		// nlp's whole job beyond its guarantee of 1.
		{ID: 5, Team: "nlp", GPUs: 1, State: job.Running, Placement: models.Strings{"n:3"}, LastStartAt: ago(1)},
		// A preempted job keeps what it ran.
		{ID: 6, Team: "vision", GPUs: 4, State: job.Preempted, ExecutedS: 7, AttainedService: 28, LastStartAt: ago(100)},
	}
	teams := []models.Team{{Name: "vision", GuaranteeGPUs: 3, Weight: 1}, {Name: "nlp", GuaranteeGPUs: 1, Weight: 1}}
	m := newMoment(now, jobs, teams, nil, func(int64) bool { return false })

	for _, tc := range []struct {
		id                 int64
		executed, attained float64
		held               float64
		borrowed           bool
	}{
		{1, 40, 80, 2, false},
		{2, 5, 5, 1.0 / 3, false}, // 1/3: three jobs on its GPU
		{3, 5, 5, 1.0 / 3, false}, // nlp: 1/3 + 0.25 within 1
		{4, 5, 5, 0.25, false},    // its fraction
		{5, 1, 1, 1, true},        // nlp: 7/12 + 1 > 1
		{6, 7, 28, 0, false},      // not running: no current run
	} {
		j := &jobs[tc.id-1]
		aj, qj := m.apiJob(j), m.queueJob(j, true)
		if !near(aj.ExecutedS, tc.executed) || !near(aj.AttainedService, tc.attained) {
			t.Errorf("job %d: executed %v, attained %v; want %v, %v", tc.id, aj.ExecutedS, aj.AttainedService, tc.executed, tc.attained)
		}
		if qj.ExecutedS != aj.ExecutedS || qj.AttainedService != aj.AttainedService || qj.Borrowed != aj.Borrowed {
			t.Errorf("job %d: queue entry %+v disagrees with the job %+v", tc.id, qj, aj)
		}
		if !near(aj.HeldGPUs, tc.held) || aj.Borrowed != tc.borrowed {
			t.Errorf("job %d: holds %v, borrowed %v; want %v, %v", tc.id, aj.HeldGPUs, aj.Borrowed, tc.held, tc.borrowed)
		}
		if (aj.AsOf != nil) != (j.State == job.Running) {
			t.Errorf("job %d (%s): as_of %v", tc.id, j.State, aj.AsOf)
		}
	}
	total := 0.0
	for _, ts := range m.TeamShares() {
		total += ts.InUseGPUs
		if ts.BorrowedGPUs > 0 != (ts.InUseGPUs > float64(ts.GuaranteeGPUs)) {
			t.Errorf("team %s: %v in use, %d guaranteed, %v borrowed", ts.Name, ts.InUseGPUs, ts.GuaranteeGPUs, ts.BorrowedGPUs)
		}
	}
	// 2 + 1 + (1/3 + 1/3 + 1/4): within the 4 GPUs they run on.
	if want := 3 + 11.0/12; !near(total, want) || !near(m.Figures.InUseGPUs(), want) {
		t.Errorf("teams hold %v GPUs, jobs %v; want %v", total, m.Figures.InUseGPUs(), want)
	}
	if v, n := m.teamShare(teams[0]), m.teamShare(teams[1]); !near(v.InUseGPUs, 7.0/3) || v.BorrowedGPUs != 0 ||
		!near(n.InUseGPUs, 1+7.0/12) || !near(n.BorrowedGPUs, 7.0/12) {
		t.Errorf("vision %+v, nlp %+v", v, n)
	}
}

// TestMomentForecasts: a waiting job's forecast comes from the moment's
// one forecast, the same in its JSON and its queue entry (where another
// team's viewer loses the reason, which may name its user); a held job
// says held, a job the forecast has not seen says so, and a running job
// has none.
func TestMomentForecasts(t *testing.T) {
	now := time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	jobs := []models.Job{
		{ID: 1, Team: "vision", User: "alice", GPUs: 2, State: job.Queued},
		{ID: 2, Team: "vision", User: "alice", GPUs: 4, State: job.Queued},
		{ID: 3, Team: "vision", GPUs: 1, State: job.Queued, Sharing: true, RequeueStalls: job.MaxRequeueStalls, Reason: "held: requeued 5 times"},
		{ID: 4, Team: "vision", GPUs: 1, State: job.Preempted},
		{ID: 5, Team: "vision", GPUs: 1, State: job.Running, Placement: models.Strings{"n:0"}, LastStartAt: &now},
	}
	m := newMoment(now, jobs, nil, nil, func(int64) bool { return false })
	m.forecasts = map[int64]engine.JobForecast{
		1: {State: forecast.StateExpected, Earliest: at(60), Likely: at(90), Latest: at(300), MadeAt: now},
		2: {State: forecast.StateNever, Reason: "cannot start while the cap of user alice in team vision is 2 GPUs: it needs 4", MadeAt: now},
	}
	f1 := m.apiJob(&jobs[0]).Forecast
	if f1 == nil || f1.State != api.ForecastExpected || !f1.Earliest.Equal(at(60)) || !f1.Likely.Equal(at(90)) || !f1.Latest.Equal(at(300)) {
		t.Fatalf("job 1's forecast %+v", f1)
	}
	if got := f1.Short(now, time.UTC); got != "10:01:00–10:05:00" {
		t.Errorf("job 1's ETA %q", got)
	}
	if got := f1.Text(now, time.UTC); got != "between 10:01:00 and 10:05:00 (in 1m00s to 5m00s), likely 10:01:30" {
		t.Errorf("job 1's forecast reads %q", got)
	}
	if q := m.queueJob(&jobs[0], true); q.Forecast == nil || !reflect.DeepEqual(*q.Forecast, *f1) {
		t.Errorf("queue entry's forecast %+v, the job's %+v", q.Forecast, f1)
	}
	f2 := m.apiJob(&jobs[1]).Forecast
	if f2.State != api.ForecastNever || f2.Text(now, time.UTC) != "never: cannot start while the cap of user alice in team vision is 2 GPUs: it needs 4" || f2.Short(now, time.UTC) != "never" {
		t.Errorf("job 2's forecast %+v", f2)
	}
	if q := m.queueJob(&jobs[1], false); q.Forecast == nil || q.Forecast.State != api.ForecastNever || q.Forecast.Reason != "" {
		t.Errorf("another team's view of job 2's forecast %+v: want never, without the reason", q.Forecast)
	}
	if f := m.apiJob(&jobs[2]).Forecast; f == nil || f.State != api.ForecastHeld {
		t.Errorf("held job's forecast %+v", f)
	}
	if f := m.apiJob(&jobs[3]).Forecast; f == nil || f.State != api.ForecastUnknown || !strings.Contains(f.Reason, "not forecast yet") {
		t.Errorf("a job the forecast has not seen: %+v", f)
	}
	if f := m.apiJob(&jobs[4]).Forecast; f != nil {
		t.Errorf("running job's forecast %+v", f)
	}
}

// TestHeldExitShows: a running job whose run ended, its outcome not yet
// stored (engine.HeldExit), says so as its reason, with the cause in a
// few words, never the store's raw error, and its figures as of its end;
// a held exit of an earlier run changes nothing.
func TestHeldExitShows(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.Local)
	end, now := start.Add(time.Minute), start.Add(100*time.Second)
	full := fmt.Errorf("record exit: %w", syscall.ENOSPC)
	j := models.Job{ID: 7, GPUs: 1, State: job.Running, Run: 2, LastStartAt: &start, Reason: "on d1:0", Placement: []string{"d1:0"}}
	tests := []struct {
		name string
		h    engine.HeldExit
		want []string // in the reason; none: the store's reason
	}{
		{"the job's own end", engine.HeldExit{Run: 2, Node: "d1", ExitCode: 3, At: end, Err: full},
			[]string{"run 2 ended on d1 at 10:01:00 (40s ago) with exit code 3", "not yet recorded", "(disk full)"}},
		{"the cluster's end", engine.HeldExit{Run: 2, Node: "d1", ExitCode: -1, Infra: true, At: end, Err: full},
			[]string{"run 2 was ended by the cluster on d1", "not by the job", "not yet recorded"}},
		{"an earlier run's", engine.HeldExit{Run: 1, Node: "d1", At: end, Err: full}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMoment(now, []models.Job{j}, nil, nil, func(int64) bool { return false })
			m.held = map[int64]engine.HeldExit{7: tc.h}
			got := m.apiJob(&j)
			if tc.want == nil {
				if got.Reason != j.Reason || !got.AsOf.Equal(now) {
					t.Errorf("reason %q as of %v; want the store's, as of now", got.Reason, got.AsOf)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Reason, w) {
					t.Errorf("reason %q; want %q in it", got.Reason, w)
				}
			}
			if strings.Contains(got.Reason, "record exit") {
				t.Errorf("reason %q: the store's raw error shows", got.Reason)
			}
			if got.AsOf == nil || !got.AsOf.Equal(end) || !near(got.ExecutedS, 60) {
				t.Errorf("as of %v, executed %.1f s; want as of its end, 60 s", got.AsOf, got.ExecutedS)
			}
		})
	}
}

// TestStoppingRunShows: a running job the engine asked to stop (a victim
// saving its checkpoint) says so, why, since when and until when at the
// latest, where the store still says only that it runs; a stop asked of
// an earlier run changes nothing.
func TestStoppingRunShows(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.Local)
	asked, now := start.Add(time.Minute), start.Add(64*time.Second)
	j := models.Job{ID: 7, GPUs: 1, State: job.Running, Run: 2, LastStartAt: &start, Reason: "", Placement: []string{"d1:0"}}
	for _, c := range []struct {
		name string
		s    engine.StoppingRun
		want []string // in the reason; none: the store's
	}{
		{"preempted, with a grace period", engine.StoppingRun{StopRequest: job.StopRequest{Run: 2, To: job.Preempted, Reason: "preempted for job 20, which ranks above it", At: asked}, KillBy: asked.Add(10 * time.Second)},
			[]string{"asked to stop at 10:01:00 (4s ago): preempted for job 20, which ranks above it", "until 10:01:10 at the latest (the grace period)", "then it is preempted"}},
		{"cancelled, no grace period known", engine.StoppingRun{StopRequest: job.StopRequest{Run: 2, To: job.Cancelled, Reason: "cancelled by alice", At: asked}},
			[]string{"asked to stop at 10:01:00 (4s ago): cancelled by alice; it runs on while it saves its work, then it is cancelled"}},
		{"an earlier run's", engine.StoppingRun{StopRequest: job.StopRequest{Run: 1, To: job.Preempted, Reason: "preempted", At: asked}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newMoment(now, []models.Job{j}, nil, nil, func(int64) bool { return false })
			m.stopping = map[int64]engine.StoppingRun{7: c.s}
			got := m.apiJob(&j).Reason
			if c.want == nil && got != j.Reason {
				t.Errorf("reason %q; want the store's %q", got, j.Reason)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("reason %q; want %q in it", got, w)
				}
			}
		})
	}
}

// TestSilentMachineShows (issue 32): a running job whose machine has gone
// silent says so, with when the machine was last heard, rather than
// running as if heard now; a job on heard machines keeps its reason.
func TestSilentMachineShows(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.Local)
	now := start.Add(100 * time.Second)
	j := models.Job{ID: 7, GPUs: 2, State: job.Running, Run: 1, LastStartAt: &start, Reason: "on a1:0, b1:0", Placement: []string{"a1:0", "b1:0"}}
	tests := []struct {
		name   string
		silent map[string]time.Time
		want   string // the reason
	}{
		{"heard", nil, j.Reason},
		{"another machine silent", map[string]time.Time{"c1": now.Add(-time.Minute)}, j.Reason},
		{"one part silent", map[string]time.Time{"b1": now.Add(-40 * time.Second)},
			"running as last known: b1 was last heard 40s ago, at 10:01:00; the job runs on if the machine does, and is requeued if it is lost"},
		{"both: the longest silent", map[string]time.Time{"a1": now.Add(-10 * time.Second), "b1": now.Add(-40 * time.Second)},
			"running as last known: b1 was last heard 40s ago, at 10:01:00; the job runs on if the machine does, and is requeued if it is lost"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMoment(now, []models.Job{j}, nil, nil, func(int64) bool { return false })
			m.silent = tc.silent
			if got := m.apiJob(&j).Reason; got != tc.want {
				t.Errorf("reason %q; want %q", got, tc.want)
			}
		})
	}
}
