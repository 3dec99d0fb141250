package live

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/telemetry"
)

// TestFramesCoalescePerGPU: machines report one at a time, several times
// each, while the reader is away; the frame it then takes holds the
// latest reading of every GPU, in the order of machine and GPU index,
// and frames are numbered from 1.
func TestFramesCoalescePerGPU(t *testing.T) {
	rec := telemetry.New(time.Minute, 10)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := New(Config{Telemetry: rec, Interval: time.Millisecond, Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	record := func(node string, sec int64, used int64) {
		rec.Record(node, []gpu.Sample{
			{At: time.Unix(sec, 0), Index: 1, MemMiB: 1024, MemUsedMiB: used},
			{At: time.Unix(sec, 0), Index: 0, MemMiB: 1024, MemUsedMiB: used},
		})
	}
	// Wait for the publisher's feed: the first reading makes a frame.
	var first Frame
	deadline := time.After(10 * time.Second)
	for first.Seq == 0 {
		record("b", 100, 1)
		select {
		case first = <-p.Frames():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("no frame within 10 s")
		}
	}
	if first.Seq != 1 {
		t.Errorf("first frame numbered %d, want 1", first.Seq)
	}
	// What comes while the reader is away goes into the frames it takes
	// next: the latest reading of each GPU, once.
	for sec := int64(101); sec <= 110; sec++ {
		record("b", sec, sec)
		record("a", sec, sec)
	}
	latest := map[gpu.Ref]int64{}
	var order []gpu.Ref
	for len(latest) < 4 || latest[gpu.Ref{Node: "a", Index: 0}] != 110 || latest[gpu.Ref{Node: "b", Index: 1}] != 110 {
		var f Frame
		select {
		case f = <-p.Frames():
		case <-deadline:
			t.Fatalf("the readings of second 110 did not come: %v", latest)
		}
		seen := map[gpu.Ref]bool{}
		order = order[:0]
		for _, g := range f.GPUs {
			if seen[g.Ref] {
				t.Fatalf("frame %d holds GPU %v twice", f.Seq, g.Ref)
			}
			seen[g.Ref] = true
			order = append(order, g.Ref)
			latest[g.Ref] = g.T
		}
		if f.Oldest().After(time.Unix(f.T, 0)) {
			t.Errorf("frame %d: oldest reading %v after its time %d", f.Seq, f.Oldest(), f.T)
		}
	}
	if len(order) == 4 {
		want := []gpu.Ref{{Node: "a", Index: 0}, {Node: "a", Index: 1}, {Node: "b", Index: 0}, {Node: "b", Index: 1}}
		for i := range want {
			if order[i] != want[i] {
				t.Errorf("frame order %v, want %v", order, want)
				break
			}
		}
	}
}
