package whatif

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
)

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// rec is a finished job submitted at submit, started at start and
// finished at end (seconds after t0), that ran for ran seconds.
func rec(id int64, team string, gpus int, submit, start, end, ran float64) Record {
	return Record{ID: id, Name: "j", Team: team, User: "ada", GPUs: gpus, GPUMilli: 1000,
		Submitted: at(submit), Started: at(start), Finished: at(end), ExecutedS: ran}
}

func TestTrace(t *testing.T) {
	tests := []struct {
		name string
		recs []Record
		want []trace.Job
	}{
		{name: "submit times are offsets from the first submit; duration is the time run",
			recs: []Record{rec(7, "nlp", 2, 100, 130, 430, 300), rec(8, "vision", 1, 160, 160, 220, 60)},
			want: []trace.Job{
				{ID: 7, Name: "j", Submit: 0, Duration: 300, GPUs: 2, GPUMilli: 1000, Team: "nlp", User: "ada"},
				{ID: 8, Name: "j", Submit: 60, Duration: 60, GPUs: 1, GPUMilli: 1000, Team: "vision", User: "ada"},
			}},
		{name: "ordered by submit, then by ID, whatever the order given",
			recs: []Record{rec(9, "a", 1, 50, 50, 80, 30), rec(3, "a", 1, 50, 60, 70, 10), rec(2, "a", 1, 10.5, 20, 30, 10)},
			want: []trace.Job{
				{ID: 2, Name: "j", Submit: 0, Duration: 10, GPUs: 1, GPUMilli: 1000, Team: "a", User: "ada"},
				{ID: 3, Name: "j", Submit: 39.5, Duration: 10, GPUs: 1, GPUMilli: 1000, Team: "a", User: "ada"},
				{ID: 9, Name: "j", Submit: 39.5, Duration: 30, GPUs: 1, GPUMilli: 1000, Team: "a", User: "ada"},
			}},
		{name: "a preempted job replays the time it ran, not its span",
			recs: []Record{rec(1, "a", 4, 0, 10, 1000, 700)},
			want: []trace.Job{{ID: 1, Name: "j", Submit: 0, Duration: 700, GPUs: 4, GPUMilli: 1000, Team: "a", User: "ada"}}},
		{name: "a job that never started, or of no GPU, is left out",
			recs: []Record{{ID: 1, GPUs: 1, Submitted: at(0), Finished: at(5)}, rec(2, "a", 0, 0, 1, 2, 1), rec(3, "a", 1, 5, 6, 7, 1)},
			want: []trace.Job{{ID: 3, Name: "j", Submit: 0, Duration: 1, GPUs: 1, GPUMilli: 1000, Team: "a", User: "ada"}}},
		{name: "a sharing job keeps its share of the GPU; an unknown share is a whole GPU",
			recs: []Record{{ID: 1, GPUs: 1, GPUMilli: 250, GPUMemMiB: 4096, Model: "resnet50", Submitted: at(0), Started: at(0), Finished: at(9), ExecutedS: 9},
				{ID: 2, GPUs: 1, Submitted: at(1), Started: at(1), Finished: at(2), ExecutedS: 1}},
			want: []trace.Job{{ID: 1, Submit: 0, Duration: 9, GPUs: 1, GPUMilli: 250, GPUMemMiB: 4096, Model: "resnet50"},
				{ID: 2, Submit: 1, Duration: 1, GPUs: 1, GPUMilli: 1000}}},
		{name: "a session replays as a session",
			recs: []Record{{ID: 1, GPUs: 1, Class: "session", Submitted: at(0), Started: at(0), Finished: at(9), ExecutedS: 9}},
			want: []trace.Job{{ID: 1, Submit: 0, Duration: 9, GPUs: 1, GPUMilli: 1000, Class: "session"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, kept := Trace(tc.recs)
			if len(got) != len(tc.want) || len(kept) != len(got) {
				t.Fatalf("got %d jobs (%d records), want %d: %+v", len(got), len(kept), len(tc.want), got)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("job %d:\n got %+v\nwant %+v", i, got[i], tc.want[i])
				}
				if kept[i].ID != got[i].ID {
					t.Errorf("record %d is job %d, trace job %d", i, kept[i].ID, got[i].ID)
				}
			}
			// What Trace gives reads back from a native trace file.
			var buf bytes.Buffer
			if err := trace.WriteNative(&buf, got); err != nil {
				t.Fatal(err)
			}
			back, err := trace.ReadNative(&buf, "export.csv")
			if err != nil {
				t.Fatalf("read back: %v", err)
			}
			for i := range back.Jobs {
				if back.Jobs[i] != got[i] {
					t.Errorf("read back job %d: %+v, wrote %+v", i, back.Jobs[i], got[i])
				}
			}
		})
	}
}

func TestActual(t *testing.T) {
	// Two GPUs. Job 1 (nlp, 2 GPUs) waits 30 s and runs 300; job 2
	// (vision, 1 GPU) waits 0 and runs 60; job 3 (vision, 1 GPU) waits
	// 100 and runs 100, preempted once in its 300 s.
	recs := []Record{rec(1, "nlp", 2, 0, 30, 330, 300), rec(2, "vision", 1, 60, 60, 120, 60), rec(3, "vision", 1, 100, 200, 400, 100)}
	recs[2].Preemptions = 1
	row := Actual(recs, 2)
	// JCTs 330, 60, 300.
	near(t, "avg JCT", row.AvgJCTS, 230)
	near(t, "p95 JCT", row.P95JCTS, 330)
	// Pending 30, 0, 200.
	near(t, "avg pending", row.AvgPendingS, 230.0/3)
	// 2x300 + 60 + 100 GPU-seconds over 2 GPUs x 400 s.
	near(t, "GPU utilization", row.GPUUtilization, 760.0/800)
	if row.Name != "actual" || !row.Actual || row.Jobs != 3 || row.Finished != 3 || row.Preemptions != 1 {
		t.Errorf("row = %+v", row)
	}
	if len(row.Teams) != 2 || row.Teams[0].Team != "nlp" || row.Teams[1].Team != "vision" {
		t.Fatalf("teams = %+v", row.Teams)
	}
	near(t, "nlp avg JCT", row.Teams[0].AvgJCTS, 330)
	near(t, "vision avg JCT", row.Teams[1].AvgJCTS, 180)
	if want := []float64{60, 300, 330}; len(row.JCTs) != 3 || row.JCTs[0] != want[0] || row.JCTs[2] != want[2] {
		t.Errorf("JCTs = %v, want %v", row.JCTs, want)
	}
}

func TestCompare(t *testing.T) {
	// One 2-GPU node. Job 1 (2 GPUs, 1,000 s) runs first; jobs 2 and 3
	// (1 GPU, 10 s each) came 1 s later and, as it happened, waited
	// behind it. Replayed, fifo keeps them waiting as well; srsf
	// preempts job 1 for them at once.
	recs := []Record{rec(1, "a", 2, 0, 0, 1020, 1000), rec(2, "b", 1, 1, 1000, 1010, 10), rec(3, "b", 1, 1, 1010, 1020, 10)}
	cfg := Config{Candidates: []string{"fifo", "srsf"}, Sim: sim.Config{Nodes: []trace.Node{{Name: "n0", GPUs: 2}}}}
	cfg.Sim.Sched.OmitWaits = true
	rep, err := Compare(context.Background(), recs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs != 3 || rep.GPUs != 2 || rep.Nodes != 1 || len(rep.Rows) != 3 {
		t.Fatalf("report = %+v", rep)
	}
	names := []string{rep.Rows[0].Name, rep.Rows[1].Name, rep.Rows[2].Name}
	if strings.Join(names, ",") != "actual,fifo,srsf" {
		t.Fatalf("rows = %v", names)
	}
	near(t, "actual avg JCT", rep.Rows[0].AvgJCTS, (1020+1009+1019)/3.0)
	// fifo: job 1 ends at 1,000; 2 and 3 run together, end at 1,010.
	near(t, "fifo avg JCT", rep.Rows[1].AvgJCTS, (1000+1009+1009)/3.0)
	// srsf: 2 and 3 (10 GPU-s each) go first at 1 s, ending at 11; job 1 ends at 1,010.
	near(t, "srsf avg JCT", rep.Rows[2].AvgJCTS, (1010+10+10)/3.0)
	if v, ok := rep.Rows[2].TeamAvgJCT("b"); !ok || math.Abs(v-10) > 1e-6 {
		t.Errorf("srsf team b avg JCT = %v, %v; want 10", v, ok)
	}
	var out bytes.Buffer
	if err := WriteTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"actual", "fifo", "srsf", "team a avg JCT s", "team b avg JCT s"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}

	// Capped, the oldest job is left out and the rest start at 0.
	cfg.MaxJobs = 2
	rep, err = Compare(context.Background(), recs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs != 2 || rep.Dropped != 1 || rep.Rows[1].AvgJCTS != 10 {
		t.Errorf("capped: jobs %d dropped %d fifo avg %v; want 2, 1, 10", rep.Jobs, rep.Dropped, rep.Rows[1].AvgJCTS)
	}
	if _, err := Compare(context.Background(), nil, cfg); err != ErrNoJobs {
		t.Errorf("no records: %v, want ErrNoJobs", err)
	}
}

func TestNodes(t *testing.T) {
	gpus := []GPU{{gpu.Ref{Node: "b", Index: 0}, 81920}, {gpu.Ref{Node: "a", Index: 1}, 40960}, {gpu.Ref{Node: "b", Index: 3}, 0}}
	for _, r := range gpu.ParsePlacement(strings.Split("a:0,b:2,bad,c:-1,:4", ",")) {
		gpus = append(gpus, GPU{Ref: r})
	}
	got := Nodes(gpus)
	want := []trace.Node{{Name: "a", GPUs: 2, GPUMemMiB: 40960}, {Name: "b", GPUs: 4, GPUMemMiB: 81920}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Nodes = %+v, want %+v", got, want)
	}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6 {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestCDF(t *testing.T) {
	rep := &Report{Rows: []Row{{Name: "actual", JCTs: []float64{10, 100, 1000}}, {Name: "fifo", JCTs: []float64{10, 10}}, {Name: "none"}}}
	xs, fs := rep.CDF(3)
	if want := []float64{10, 100, 1000}; len(xs) != 3 || math.Abs(xs[0]-want[0]) > 1e-9 || math.Abs(xs[1]-want[1]) > 1e-9 || xs[2] != want[2] {
		t.Fatalf("xs = %v, want %v", xs, want)
	}
	want := [][]float64{{1.0 / 3, 2.0 / 3, 1}, {1, 1, 1}, {0, 0, 0}}
	for i := range want {
		for k := range want[i] {
			if math.Abs(fs[i][k]-want[i][k]) > 1e-9 {
				t.Errorf("row %d at %v: %v, want %v", i, xs[k], fs[i][k], want[i][k])
			}
		}
	}
	if xs, fs := (&Report{Rows: []Row{{Name: "actual"}}}).CDF(10); xs != nil || fs != nil {
		t.Errorf("no JCTs: %v %v, want none", xs, fs)
	}
}
