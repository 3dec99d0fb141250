package telemetry

import (
	"math"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// reading is GPU index of node n0 read at t, with jobs placed on it.
func reading(t int64, index int, used int64, util, power float64, temp int, jobs int) GPUFrame {
	p := Point{T: t, MemUsedMiB: used, MemMiB: 1000, UtilPct: util, PowerW: power, TempC: temp}
	for j := range jobs {
		p.Held = append(p.Held, int64(j+1))
	}
	return GPUFrame{Ref: gpu.Ref{Node: "n0", Index: index}, Point: p}
}

func frame(gs ...GPUFrame) Frame { return Frame{T: gs[0].T, GPUs: gs} }

func TestDownsamplerClosesBuckets(t *testing.T) {
	d := NewDownsampler(60)
	var closed []Aggregate
	// Two GPUs, 120 seconds from t=600: GPU 0 busy at 100..700 MiB, GPU 1 idle.
	for ts := int64(600); ts < 720; ts++ {
		used := 100 + (ts-600)*5
		closed = append(closed, d.AddFrame(frame(
			reading(ts, 0, used, 50, 200, 60, 1),
			reading(ts, 1, 0, 0, 0, 0, 0),
		))...)
	}
	if len(closed) != 2 {
		t.Fatalf("closed %d buckets after the first minute, want 2 (one per GPU): %+v", len(closed), closed)
	}
	a := closed[0]
	if a.GPU != (gpu.Ref{Node: "n0", Index: 0}) || a.Start != 600 || a.Step != 60 || a.Samples != 60 || a.BusySamples != 60 {
		t.Errorf("GPU 0 minute = %+v", a)
	}
	if want := 100 + 5*59.0/2; math.Abs(a.MemUsedAvgMiB-want) > 1e-9 || a.MemUsedMaxMiB != 100+5*59 {
		t.Errorf("memory avg %v max %d, want %v and %d", a.MemUsedAvgMiB, a.MemUsedMaxMiB, want, 100+5*59)
	}
	if a.PowerAvgW != 200 || a.PowerSamples != 60 || a.TempAvgC != 60 || a.UtilAvgPct != 50 {
		t.Errorf("power/temp/util = %v/%v/%v", a.PowerAvgW, a.TempAvgC, a.UtilAvgPct)
	}
	if b := closed[1]; b.BusySamples != 0 || b.PowerSamples != 0 || b.TempSamples != 0 || b.MemUsedMaxMiB != 0 {
		t.Errorf("idle GPU without power or temperature readings = %+v", b)
	}
	rest := d.Flush()
	if len(rest) != 2 || rest[0].Start != 660 || rest[0].Samples != 60 {
		t.Errorf("flush = %+v", rest)
	}
	if len(d.Flush()) != 0 {
		t.Error("a second flush returned buckets")
	}
}

func TestDownsamplerDropsReadingsFromThePast(t *testing.T) {
	d := NewDownsampler(60)
	d.AddFrame(frame(reading(130, 0, 10, 0, 0, 0, 0)))
	if got := d.AddFrame(frame(reading(50, 0, 999, 0, 0, 0, 0))); len(got) != 0 {
		t.Errorf("a reading from an earlier minute closed %+v", got)
	}
	if got := d.Flush(); len(got) != 1 || got[0].MemUsedMaxMiB != 10 || got[0].Samples != 1 {
		t.Errorf("open bucket = %+v", got)
	}
}

func TestAddFrameFoldsRecorderFrames(t *testing.T) {
	r := New(time.Minute, 2)
	frames, cancel := r.SubscribeBuffered(200)
	defer cancel()
	d := NewDownsampler(60)
	held := map[gpu.Ref][]int64{{Node: "n0", Index: 3}: {1}}
	for ts := int64(0); ts < 121; ts++ {
		r.RecordHeld("n0", []gpu.Sample{{At: time.Unix(ts, 0), Index: 3, MemUsedMiB: 100, MemMiB: 1000, UtilPct: 20,
			PowerW: 150, TempC: 40}}, held)
	}
	var closed []Aggregate
	for range 121 {
		closed = append(closed, d.AddFrame(<-frames)...)
	}
	if len(closed) != 2 || closed[0].GPU != (gpu.Ref{Node: "n0", Index: 3}) || closed[0].Samples != 60 || closed[1].Start != 60 ||
		closed[0].PowerAvgW != 150 || closed[0].TempAvgC != 40 || closed[0].BusySamples != 60 {
		t.Errorf("closed = %+v", closed)
	}
	if rest := d.Flush(); len(rest) != 1 || rest[0].Start != 120 || rest[0].Samples != 1 {
		t.Errorf("open = %+v", rest)
	}
}

// A GPU is busy when the scheduler placed a job on it, not when a job
// holds memory there: a job that has not allocated yet keeps its GPU
// busy, and memory left by no placed job (a process outside the cluster,
// a job being stopped) does not.
func TestBusyIsPlacement(t *testing.T) {
	r := New(time.Minute, 2)
	k0, k1 := gpu.Ref{Node: "n0", Index: 0}, gpu.Ref{Node: "n0", Index: 1}
	at := time.Unix(100, 0)
	r.RecordHeld("n0", []gpu.Sample{
		{At: at, Index: 0, MemMiB: 1000},
		{At: at, Index: 1, MemMiB: 1000, MemUsedMiB: 500, Jobs: []gpu.JobMem{{JobID: 7, MemMiB: 500}}},
	}, map[gpu.Ref][]int64{k0: {7}})
	if p := r.GPU(k0, 0); len(p) != 1 || !p[0].Busy() || len(p[0].Held) != 1 || p[0].Held[0] != 7 {
		t.Errorf("GPU 0, job 7 placed, no memory yet: %+v", p)
	}
	if p := r.GPU(k1, 0); len(p) != 1 || p[0].Busy() {
		t.Errorf("GPU 1, memory but no job placed: %+v", p)
	}
	r.Record("n0", []gpu.Sample{{At: at.Add(time.Second), Index: 0, MemMiB: 1000}})
	if p := r.GPU(k0, 101); len(p) != 1 || p[0].Busy() {
		t.Errorf("a reading recorded without holders: %+v", p)
	}
}
