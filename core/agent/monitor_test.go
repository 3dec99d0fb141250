package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// watchedGPU is one GPU whose processes NVML would report.
type watchedGPU struct{ procs []gpu.ProcMem }

func (b watchedGPU) Devices() []gpu.Device {
	return []gpu.Device{{Index: 0, UUID: "GPU-0", Model: "test", MemMiB: 40960}}
}

func (b watchedGPU) Sample(now time.Time) []gpu.Sample {
	var used int64
	for _, p := range b.procs {
		used += p.MemMiB
	}
	return []gpu.Sample{{At: now, Index: 0, MemMiB: 40960, MemUsedMiB: used, Processes: append([]gpu.ProcMem(nil), b.procs...)}}
}

// fakeProc writes a process's environment where the agent reads it.
func fakeProc(t *testing.T, dir string, pid int, env ...string) {
	t.Helper()
	p := filepath.Join(dir, strconv.Itoa(pid))
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, kv := range env {
		b = append(append(b, kv...), 0)
	}
	if err := os.WriteFile(filepath.Join(p, "environ"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMonitorOnlyAgentRefusesStartsAndNamesJobsByEnvironment(t *testing.T) {
	proc := t.TempDir()
	fakeProc(t, proc, 100, "PATH=/bin", "SLURM_JOB_ID=55", "GPUPORTAL_JOB_ID=7")
	fakeProc(t, proc, 101, "GPUPORTAL_JOB_ID=7")
	fakeProc(t, proc, 200, "HOME=/root") // not a gpuportal job
	fakeProc(t, proc, 300, "GPUPORTAL_JOB_ID=nope")
	// PID 400 is gone, or another user's: unreadable.
	be := watchedGPU{procs: []gpu.ProcMem{{PID: 100, MemMiB: 1000}, {PID: 101, MemMiB: 500}, {PID: 200, MemMiB: 50}, {PID: 300, MemMiB: 5}, {PID: 400, MemMiB: 1}}}
	exits := make(chan job.Exit, 1)
	a, err := New(Config{Name: "n1", Backend: be, WorkDir: t.TempDir(), MonitorOnly: true, ProcDir: proc}, exits)
	if err != nil {
		t.Fatal(err)
	}
	if !a.MonitorOnly() {
		t.Error("MonitorOnly() = false")
	}
	err = a.Start(context.Background(), job.Spec{JobID: 3, GPUs: []int{0}, Command: []string{"true"}})
	if !errors.Is(err, ErrMonitorOnly) {
		t.Fatalf("Start = %v, want ErrMonitorOnly", err)
	}
	if len(a.Running()) != 0 {
		t.Errorf("running %v after a refused start", a.Running())
	}
	ss := a.Sample(time.Unix(1000, 0))
	if len(ss) != 1 || ss[0].MemUsedMiB != 1556 {
		t.Fatalf("samples = %+v", ss)
	}
	if j := ss[0].Jobs; len(j) != 1 || j[0].JobID != 7 || j[0].MemMiB != 1500 {
		t.Errorf("jobs = %+v, want job 7 with its two processes' 1500 MiB", j)
	}
	if p := ss[0].Processes; len(p) != 3 {
		t.Errorf("processes left = %+v, want 200, 300 and 400", p)
	}
}
