package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
)

func TestSqueueFormat(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	started, asOf := now.Add(-2*time.Hour), now.Add(-time.Minute)
	limit := 7200.0
	jobs := []api.Job{
		{ID: 41, Name: "ddp-bert-large-pretraining", User: "alice", Team: "vision", GPUs: 16, State: job.Running,
			Placement: []string{"gpu-a:0", "gpu-a:1", "gpu-b:0"}, StartedAt: &started, AsOf: &asOf, ExecutedS: 3600, TimeLimitS: &limit},
		{ID: 43, Name: "sweep[2]", User: "bob", Team: "nlp", GPUs: 1, State: job.Queued, Reason: "waiting for\n2 GPUs",
			Array: &api.ArrayTask{ID: 42, Index: 2}},
		{ID: 44, Name: "x", User: "bob", Team: "nlp", GPUs: 1, State: job.TimedOut},
		// A job of two machines waiting with a reservation, and one without.
		{ID: 45, Name: "big", User: "carol", Team: "nlp", GPUs: 12, State: job.Queued, Reason: "reserved",
			Reservation: &api.Reservation{Count: 12, GPUs: []string{"n1:0", "n1:1", "n1:2", "n1:3", "n1:4", "n1:5", "n1:6", "n1:7", "n2:0", "n2:1", "n2:2", "n2:3"}}},
		{ID: 46, Name: "big2", User: "carol", Team: "nlp", GPUs: 12, State: job.Queued, Reason: "waiting"},
	}
	for _, tc := range []struct {
		format   string
		noHeader bool
		want     string
	}{
		{squeueDefault, false, "" +
			"             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n" +
			"                41    vision ddp-bert    alice  R    1:01:00      2 gpu-a,gpu-b\n" +
			"              42_2       nlp sweep[2]      bob PD       0:00      1 (waiting for 2 GPUs)\n" +
			"                44       nlp        x      bob TO       0:00      1 (None)\n" +
			"                45       nlp      big    carol PD       0:00      2 (reserved)\n" +
			"                46       nlp     big2    carol PD       0:00      1 (waiting)\n"},
		{"%i|%T|%l|%D|%b|%K|%F|%N", true, "41|RUNNING|02:00:00|2|gres/gpu:2|N/A|41|gpu-a,gpu-b\n42_2|PENDING|UNLIMITED|1|gres/gpu:1|2|42|\n" +
			"44|TIMEOUT|UNLIMITED|1|gres/gpu:1|N/A|44|\n45|PENDING|UNLIMITED|2|gres/gpu:8|N/A|45|\n46|PENDING|UNLIMITED|1|gres/gpu:12|N/A|46|\n"},
		{"%10j%%", true, "ddp-bert-l%\nsweep[2]  %\nx         %\nbig       %\nbig2      %\n"},
	} {
		items, err := parseSqueueFormat(tc.format)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		writeSqueue(&b, items, jobs, squeueView{now: now}, tc.noHeader)
		if b.String() != tc.want {
			t.Errorf("format %q:\n%s\nwant:\n%s", tc.format, b.String(), tc.want)
		}
	}
	// A waiting job without a reservation needs the fewest machines that
	// hold its GPUs, the largest first.
	for _, tc := range []struct {
		gpus     int
		machines []int
		want     string
	}{
		{8, nil, "1 gres/gpu:8"},
		{8, []int{4, 4}, "2 gres/gpu:4"},
		{8, []int{8, 4}, "1 gres/gpu:8"},
		{12, []int{8, 8, 4}, "2 gres/gpu:8"},
		{2, []int{8, 8}, "1 gres/gpu:2"},
		{16, []int{4, 4}, "2 gres/gpu:4"}, // more than the cluster: all of it
	} {
		items, err := parseSqueueFormat("%D %b")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		writeSqueue(&b, items, []api.Job{{ID: 1, GPUs: tc.gpus, State: job.Queued}}, squeueView{now: now, machines: tc.machines}, true)
		if got := strings.TrimSpace(b.String()); got != tc.want {
			t.Errorf("%d GPUs waiting on machines %v: %q, want %q", tc.gpus, tc.machines, got, tc.want)
		}
	}
	for _, bad := range []string{"%z", "%.", "%5", "%99999i"} {
		if _, err := parseSqueueFormat(bad); err == nil || !strings.Contains(err.Error(), "--format") {
			t.Errorf("format %q: %v, want an error naming --format", bad, err)
		}
	}
	for in, want := range map[string]job.State{"PD": job.Queued, "running": job.Running, "TIMEOUT": job.TimedOut, "cd": job.Succeeded} {
		if got, ok := fromSlurmState(in); !ok || got != want {
			t.Errorf("fromSlurmState(%q) = %s, %v; want %s", in, got, ok, want)
		}
	}
	if _, ok := fromSlurmState("ZZ"); ok {
		t.Error("fromSlurmState(ZZ) ok")
	}
}

// TestSqueueStart: squeue --start's format gives a waiting job's
// expected start (%S: its forecast's likely start, else its earliest;
// N/A for none) and the machines reserved for it (%Y), soonest first as
// job list --start orders them; a running job's %S is when it started.
func TestSqueueStart(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	clock := func(d time.Duration) string { return now.Add(d).Local().Format("2006-01-02T15:04:05") }
	jobs := []api.Job{
		{ID: 50, Name: "likely", User: "alice", Team: "vision", GPUs: 1, State: job.Queued, Reason: "needs 1 GPU; 0 free",
			Forecast: &api.Forecast{State: api.ForecastExpected, Earliest: at(time.Minute), Likely: at(10 * time.Minute), Latest: at(time.Hour)}},
		{ID: 51, Name: "later", User: "bob", Team: "nlp", GPUs: 2, State: job.Preempted, Reason: "preempted",
			Forecast: &api.Forecast{State: api.ForecastLater, Earliest: at(2 * time.Hour), Reason: "beyond reach"}},
		{ID: 52, Name: "reserved", User: "carol", Team: "nlp", GPUs: 12, State: job.Queued, Reason: "reserved",
			Reservation: &api.Reservation{Count: 12, GPUs: []string{"n1:0", "n1:1", "n1:2", "n1:3", "n1:4", "n1:5", "n1:6", "n1:7", "n2:0", "n2:1", "n2:2", "n2:3"}},
			Forecast:    &api.Forecast{State: api.ForecastExpected, Earliest: at(5 * time.Minute), Likely: at(5 * time.Minute), Latest: at(5 * time.Minute)}},
		{ID: 53, Name: "capped", User: "dave", Team: "vision", GPUs: 4, State: job.Queued, Reason: "user cap",
			Forecast: &api.Forecast{State: api.ForecastNever, Reason: "cap"}},
		{ID: 54, Name: "new", User: "erin", Team: "vision", GPUs: 1, State: job.Queued, Reason: "just submitted"},
		// The earliest of a range without a likely start.
		{ID: 55, Name: "wide", User: "bob", Team: "nlp", GPUs: 1, State: job.Queued, Reason: "wide",
			Forecast: &api.Forecast{State: api.ForecastExpected, Earliest: at(7 * time.Minute)}},
	}
	sortByStart(jobs)
	items, err := parseSqueueFormat(squeueStartFormat)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeSqueue(&b, items, jobs, squeueView{now: now}, false)
	want := "" +
		"             JOBID PARTITION     NAME     USER ST          START_TIME  NODES SCHEDNODES           NODELIST(REASON)\n" +
		"                52       nlp reserved    carol PD " + clock(5*time.Minute) + "      2 n1,n2                (reserved)\n" +
		"                55       nlp     wide      bob PD " + clock(7*time.Minute) + "      1 (null)               (wide)\n" +
		"                50    vision   likely    alice PD " + clock(10*time.Minute) + "      1 (null)               (needs 1 GPU; 0 free)\n" +
		"                51       nlp    later      bob PR " + clock(2*time.Hour) + "      1 (null)               (preempted)\n" +
		"                53    vision   capped     dave PD                 N/A      1 (null)               (user cap)\n" +
		"                54    vision      new     erin PD                 N/A      1 (null)               (just submitted)\n"
	if b.String() != want {
		t.Errorf("squeue --start:\n%s\nwant:\n%s", b.String(), want)
	}
	started := now.Add(-time.Hour)
	running := api.Job{ID: 60, State: job.Running, StartedAt: &started, Placement: []string{"n1:0"},
		Reservation: &api.Reservation{GPUs: []string{"n2:0"}}}
	items, err = parseSqueueFormat("%S %Y")
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	writeSqueue(&b, items, []api.Job{running}, squeueView{now: now}, true)
	if got, want := strings.TrimSpace(b.String()), started.Local().Format("2006-01-02T15:04:05")+" (null)"; got != want {
		t.Errorf("a running job: %q, want %q", got, want)
	}
}

// TestSqueueFlagsRefused: flags that cannot go together are refused
// naming them, before any request: --me with -u (the server's answer
// named its own fields, without squeue), and -t naming a state that does
// not wait with --start, which lists waiting jobs.
func TestSqueueFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"squeue", "--me", "-u", "bob"}, "squeue: --me and -u bob: give one"},
		{[]string{"squeue", "--start", "-t", "PD,R"}, "squeue: -t PD,R with --start: R jobs do not wait to start"},
	} {
		var out, errOut bytes.Buffer
		c := jobCmd{getenv: func(string) string { return "" }, configDir: func() (string, error) { return t.TempDir(), nil },
			now: time.Now, stdout: &out, stderr: &errOut}
		if err := c.execute(context.Background(), tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v; want %q", tc.args, err, tc.want)
		}
	}
}
