package telemetry

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

func samples(t int64, used int64, jobs ...gpu.JobMem) []gpu.Sample {
	return []gpu.Sample{{At: time.Unix(t, 0), Index: 0, MemUsedMiB: used, MemMiB: 1000, Jobs: jobs}}
}

func TestRecorderKeepsAWindow(t *testing.T) {
	r := New(3*time.Second, 10)
	for ts := int64(1); ts <= 5; ts++ {
		r.Record("n0", samples(ts, ts*10, gpu.JobMem{JobID: 7, MemMiB: ts}))
	}
	got := r.GPU(gpu.Ref{Node: "n0", Index: 0}, 0)
	if len(got) != 3 || got[0].T != 3 || got[2].MemUsedMiB != 50 {
		t.Errorf("history = %+v; want the last 3 points, oldest first", got)
	}
	if got := r.GPU(gpu.Ref{Node: "n0", Index: 0}, 5); len(got) != 1 {
		t.Errorf("since 5: %d points, want 1", len(got))
	}
	if jp := r.Job(7, 0); len(jp) != 5 || jp[4].MemMiB != 5 {
		t.Errorf("job history = %+v", jp)
	}
	if r.GPU(gpu.Ref{Node: "n9", Index: 0}, 0) != nil || r.Job(99, 0) != nil {
		t.Error("unknown series should be empty")
	}
}

func TestRecorderEvictsOldestJob(t *testing.T) {
	r := New(time.Minute, 2)
	r.Record("n0", samples(1, 0, gpu.JobMem{JobID: 1, MemMiB: 1}))
	r.Record("n0", samples(2, 0, gpu.JobMem{JobID: 2, MemMiB: 1}))
	r.Record("n0", samples(3, 0, gpu.JobMem{JobID: 3, MemMiB: 1}))
	if r.Job(1, 0) != nil || r.Job(2, 0) == nil || r.Job(3, 0) == nil {
		t.Error("want job 1 evicted, jobs 2 and 3 kept")
	}
}

func TestSubscribersGetFrames(t *testing.T) {
	r := New(time.Minute, 2)
	ch, cancel := r.Subscribe()
	r.Record("n0", samples(1, 10))
	f := <-ch
	if f.T != 1 || len(f.GPUs) != 1 || f.GPUs[0].Node != "n0" || f.GPUs[0].MemUsedMiB != 10 {
		t.Errorf("frame = %+v", f)
	}
	cancel()
	r.Record("n0", samples(2, 10)) // must not block or panic
	select {
	case f := <-ch:
		t.Errorf("frame after cancel: %+v", f)
	default:
	}
}

func TestRingGrowsThenWraps(t *testing.T) {
	r := newRing[int64](4)
	id := func(v int64) int64 { return v }
	for v := int64(1); v <= 3; v++ {
		r.add(v)
	}
	if got := r.since(0, id); len(got) != 3 || got[0] != 1 || got[2] != 3 || cap(r.buf) > 4 {
		t.Errorf("before full: %v (buffer cap %d)", got, cap(r.buf))
	}
	for v := int64(4); v <= 10; v++ {
		r.add(v)
	}
	if got := r.since(0, id); len(got) != 4 || got[0] != 7 || got[3] != 10 {
		t.Errorf("after wrapping: %v, want 7..10", got)
	}
	if got := r.since(9, id); len(got) != 2 || got[0] != 9 {
		t.Errorf("since 9: %v", got)
	}
}

// A feed keeps every frame of many machines while its reader is away,
// and counts only what falls past its bound.
func TestFeedKeepsEveryMachine(t *testing.T) {
	r := New(time.Minute, 10)
	f, cancel := r.Feed(600)
	defer cancel()
	at := time.Unix(1000, 0)
	for i := range 500 {
		r.Record(fmt.Sprintf("m%03d", i), []gpu.Sample{{At: at, Index: 0, MemMiB: 80}})
	}
	<-f.Ready()
	frames, dropped := f.Take()
	if len(frames) != 500 || dropped != 0 {
		t.Fatalf("took %d frames, %d dropped; want 500, 0", len(frames), dropped)
	}
	for i := range 700 {
		r.Record(fmt.Sprintf("m%03d", i), []gpu.Sample{{At: at, Index: 0, MemMiB: 80}})
	}
	frames, dropped = f.Take()
	if len(frames) != 600 || dropped != 100 || frames[0].GPUs[0].Node != "m100" {
		t.Fatalf("took %d frames (first %s), %d dropped; want 600 from m100, 100", len(frames), frames[0].GPUs[0].Node, dropped)
	}
}
