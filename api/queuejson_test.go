package api

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// TestQueuesAppendJSON checks that Queues.AppendJSON writes what
// encoding/json's Marshal writes, byte for byte, and fails where it
// fails.
func TestQueuesAppendJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 2, 3, 456789012, time.UTC)
	zone := time.FixedZone("x", -(3*3600 + 30*60))
	ptr := func(t time.Time) *time.Time { return &t }
	queued := func(id int64) QueueJob {
		return QueueJob{ID: id, Name: "train-7", Team: "vision", User: "alice", GPUs: 2, State: job.Queued,
			ExecutedS: 1200.5, AttainedService: 2401, Reason: "waiting for 2 GPUs", Priority: "normal", Position: 3,
			Forecast: &Forecast{State: "forecast", Earliest: ptr(at), Likely: ptr(at.Add(time.Hour)), Latest: ptr(at.In(zone)),
				Reason: "behind 2 jobs", MadeAt: ptr(at.Truncate(time.Second))}}
	}
	typical := Queues{Policy: "tiresias-l", Thresholds: []float64{3600, 36000}, AsOf: at, Queues: []Queue{
		{Index: 0, To: 3600, Total: 3, Running: 1, Jobs: []QueueJob{queued(1), queued(2), {ID: 3, Team: "nlp", State: job.Running}}, NextCursor: "0.3.3"},
		{Index: 1, From: 3600, To: 36000, Jobs: []QueueJob{}},
		{Index: 2, From: 36000, Offset: 100},
	}}
	with := func(f func(q *Queues)) Queues {
		var q Queues
		b, _ := json.Marshal(typical)
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatal(err)
		}
		f(&q)
		return q
	}
	j0 := func(f func(j *QueueJob)) Queues { return with(func(q *Queues) { f(&q.Queues[0].Jobs[0]) }) }
	for _, tc := range []struct {
		name string
		q    Queues
	}{
		{"zero", Queues{}},
		{"typical", typical},
		{"no thresholds, no queues", with(func(q *Queues) { q.Thresholds, q.Queues = []float64{}, []Queue{} })},
		{"a job hidden from its viewer", j0(func(j *QueueJob) { j.Name, j.User, j.Reason, j.Forecast.Reason = "", "", "", "" })},
		{"no forecast", j0(func(j *QueueJob) { j.Forecast = nil })},
		{"a forecast of no times", j0(func(j *QueueJob) { j.Forecast = &Forecast{State: "unknown"} })},
		{"a session", j0(func(j *QueueJob) { j.Priority, j.Position, j.Borrowed = "", 0, true })},
		{"HTML and quotes", j0(func(j *QueueJob) { j.Name, j.Reason = `<script>"a" & 'b'</script>`, `back\slash` })},
		{"control characters", j0(func(j *QueueJob) { j.Name = "tab\there\nnew\rline\b\f\x00\x1f\x7f" })},
		{"unicode", j0(func(j *QueueJob) { j.Name, j.User = "模型-训练 é", "line\u2028sep\u2029para" })},
		{"invalid UTF-8", j0(func(j *QueueJob) { j.Name = "bad\xff\xfe byte \xc3" })},
		{"floats", with(func(q *Queues) {
			q.Thresholds = []float64{0, 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, 123456789.125, 1e20, 1e21, 1.5e300, -2.5e-10, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Copysign(0, -1)}
		})},
		{"times in zones and at zero", with(func(q *Queues) {
			q.AsOf = time.Time{}
			f := q.Queues[0].Jobs[0].Forecast
			f.Earliest, f.Likely = ptr(at.In(time.FixedZone("y", 14*3600))), ptr(time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC))
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.q.AppendJSON([]byte("prefix"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix"+string(want) {
				t.Errorf("AppendJSON:\n%s\nwant (encoding/json):\n%s", got, want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		q    Queues
	}{
		{"NaN", with(func(q *Queues) { q.Thresholds[0] = math.NaN() })},
		{"infinite service", j0(func(j *QueueJob) { j.AttainedService = math.Inf(1) })},
		{"year 10000", j0(func(j *QueueJob) { j.Forecast.Likely = ptr(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) })},
		{"a zone of 24 hours", with(func(q *Queues) { q.AsOf = at.In(time.FixedZone("z", 24*3600)) })},
	} {
		t.Run("fails: "+tc.name, func(t *testing.T) {
			if _, err := json.Marshal(tc.q); err == nil {
				t.Fatal("encoding/json wrote it")
			}
			if got, err := tc.q.AppendJSON(nil); err == nil {
				t.Errorf("AppendJSON wrote %s, want an error as encoding/json's", got)
			}
		})
	}
	t.Run("random strings and figures", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		alphabet := []string{"a", "Z", "0", " ", "<", ">", "&", `"`, `\`, "\n", "\x01", "\x7f", "é", "\u2028", "\xff", "💡", "'", "/"}
		str := func() string {
			var b strings.Builder
			for range r.IntN(12) {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			return b.String()
		}
		for i := range 500 {
			j := queued(int64(i))
			j.Name, j.User, j.Team, j.Reason, j.Priority = str(), str(), str(), str(), str()
			j.ExecutedS, j.AttainedService = r.NormFloat64()*math.Pow(10, float64(r.IntN(40)-20)), float64(r.Int64())
			j.Position, j.GPUs = r.IntN(3)-1, r.IntN(9)
			q := Queues{Policy: str(), Thresholds: []float64{r.ExpFloat64()}, AsOf: at.Add(time.Duration(r.Int64N(1e18))),
				Queues: []Queue{{Index: i, NextCursor: str(), Jobs: []QueueJob{j}}}}
			want, err := json.Marshal(q)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := q.AppendJSON(nil); err != nil || string(got) != string(want) {
				t.Fatalf("AppendJSON: %s, %v\nwant (encoding/json):\n%s", got, err, want)
			}
		}
	})
}
