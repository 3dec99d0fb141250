//go:build cgo

package nvml

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// reading is what one mocked GPU reports.
type reading struct {
	usedBytes uint64 // as NVML's v2 memory info and nvidia-smi count it
	// reservedBytes is the driver's own memory, which NVML's v1 memory
	// info counts as used.
	reservedBytes uint64
	noV2          bool // a driver without v2 memory info
	util          uint32
	tempC         uint32
	powerMW       uint32
	ecc           uint64
	eccRet        nv.Return // ERROR_NOT_SUPPORTED on GPUs without ECC
	compute       []nv.ProcessInfo
	graphics      []nv.ProcessInfo
	failureRet    nv.Return // when set, every reading but memory fails with it
}

// fakeMachine is a DGX A100 (8 GPUs of 40 GB) from go-nvml's mock whose
// GPUs report the given readings.
func fakeMachine(t *testing.T, readings map[int]reading) *dgxa100.Server {
	t.Helper()
	srv := dgxa100.New()
	// No XID events unless a test queues some (see queueEvents).
	newEventQueue(srv)
	for i, d := range srv.Devices {
		dev := d.(*dgxa100.Device)
		r := readings[i]
		ret := func(def nv.Return) nv.Return {
			if r.failureRet != 0 {
				return r.failureRet
			}
			return def
		}
		dev.MemoryInfo.Used = r.usedBytes + r.reservedBytes
		dev.MemoryInfo.Free = dev.MemoryInfo.Total - dev.MemoryInfo.Used
		total := dev.MemoryInfo.Total
		dev.GetMemoryInfo_v2Func = func() (nv.Memory_v2, nv.Return) {
			if r.noV2 {
				return nv.Memory_v2{}, nv.ERROR_FUNCTION_NOT_FOUND
			}
			return nv.Memory_v2{Total: total, Reserved: r.reservedBytes, Used: r.usedBytes,
				Free: total - r.usedBytes - r.reservedBytes}, nv.SUCCESS
		}
		dev.GetUtilizationRatesFunc = func() (nv.Utilization, nv.Return) {
			return nv.Utilization{Gpu: r.util}, ret(nv.SUCCESS)
		}
		dev.GetTemperatureFunc = func(s nv.TemperatureSensors) (uint32, nv.Return) {
			if s != nv.TEMPERATURE_GPU {
				return 0, nv.ERROR_INVALID_ARGUMENT
			}
			return r.tempC, ret(nv.SUCCESS)
		}
		dev.GetPowerUsageFunc = func() (uint32, nv.Return) { return r.powerMW, ret(nv.SUCCESS) }
		dev.GetTotalEccErrorsFunc = func(typ nv.MemoryErrorType, ctr nv.EccCounterType) (uint64, nv.Return) {
			if typ != nv.MEMORY_ERROR_TYPE_UNCORRECTED || ctr != nv.VOLATILE_ECC {
				return 0, nv.ERROR_INVALID_ARGUMENT
			}
			if r.eccRet != 0 {
				return 0, r.eccRet
			}
			return r.ecc, ret(nv.SUCCESS)
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nv.ProcessInfo, nv.Return) { return r.compute, ret(nv.SUCCESS) }
		dev.GetGraphicsRunningProcessesFunc = func() ([]nv.ProcessInfo, nv.Return) { return r.graphics, ret(nv.SUCCESS) }
	}
	return srv
}

func quietLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

func TestDevicesOfAFakeDGX(t *testing.T) {
	srv := fakeMachine(t, nil)
	b, err := New(srv, quietLogger(&bytes.Buffer{}))
	if err != nil {
		t.Fatal(err)
	}
	devs := b.Devices()
	if len(devs) != 8 {
		t.Fatalf("%d GPUs, want 8", len(devs))
	}
	for i, d := range devs {
		want := srv.Devices[i].(*dgxa100.Device)
		if d.Index != i || d.UUID != want.UUID || d.Model != "Mock NVIDIA A100-SXM4-40GB" || d.MemMiB != 40960 {
			t.Errorf("GPU %d = %+v", i, d)
		}
	}
}

func TestSampleReadsEveryGPU(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name    string
		reading reading
		check   func(t *testing.T, s sampleView)
	}{
		{"idle GPU", reading{tempC: 31, powerMW: 52_500}, func(t *testing.T, s sampleView) {
			s.want(t, 0, 40960, 0, 31, 52.5, 0, 0)
		}},
		{"busy GPU with ECC errors", reading{usedBytes: 30 * gib, util: 97, tempC: 71, powerMW: 389_000, ecc: 2}, func(t *testing.T, s sampleView) {
			s.want(t, 30*1024, 40960, 97, 71, 389, 2, 0)
		}},
		{"processes, each once, with their memory", reading{
			usedBytes: 12 * gib,
			compute:   []nv.ProcessInfo{{Pid: 100, UsedGpuMemory: 8 * gib}, {Pid: 200, UsedGpuMemory: 4 * gib}},
			graphics:  []nv.ProcessInfo{{Pid: 200, UsedGpuMemory: 4 * gib}, {Pid: 300, UsedGpuMemory: memNotAvailable}},
		}, func(t *testing.T, s sampleView) {
			got := s.Processes
			if len(got) != 3 || got[0].PID != 100 || got[0].MemMiB != 8192 || got[1].MemMiB != 4096 || got[2].PID != 300 || got[2].MemMiB != 0 {
				t.Errorf("processes = %+v; want 100: 8 GiB, 200: 4 GiB, 300: unknown", got)
			}
		}},
		{"used memory leaves out the driver's reserved memory", reading{usedBytes: 2 * gib, reservedBytes: 480 << 20}, func(t *testing.T, s sampleView) {
			s.want(t, 2048, 40960, 0, 0, 0, 0, 0)
			if s.MemReservedMiB != 480 {
				t.Errorf("reserved %d MiB, want 480", s.MemReservedMiB)
			}
		}},
		{"a driver without v2 memory info: v1, said once", reading{usedBytes: 2 * gib, reservedBytes: 480 << 20, noV2: true}, func(t *testing.T, s sampleView) {
			s.want(t, 2048+480, 40960, 0, 0, 0, 0, 0)
			if s.MemReservedMiB != 0 || strings.Count(s.log, "no v2 memory info") != 1 {
				t.Errorf("reserved %d MiB, log:\n%s\nwant 0 and the fallback said once", s.MemReservedMiB, s.log)
			}
		}},
		{"no ECC on this GPU is not a failure", reading{tempC: 40, eccRet: nv.ERROR_NOT_SUPPORTED}, func(t *testing.T, s sampleView) {
			s.want(t, 0, 40960, 0, 40, 0, 0, 0)
			if s.log != "" {
				t.Errorf("logged %q for an unsupported reading", s.log)
			}
		}},
		{"a lost GPU reads zero and is logged once", reading{usedBytes: gib, failureRet: nv.ERROR_GPU_IS_LOST}, func(t *testing.T, s sampleView) {
			s.want(t, 1024, 40960, 0, 0, 0, 0, 0)
			if n := strings.Count(s.log, "cannot read a GPU"); n != 6 {
				t.Errorf("logged %d failures over two samples, want 6 (one per reading):\n%s", n, s.log)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			b, err := New(fakeMachine(t, map[int]reading{5: tc.reading}), quietLogger(&log))
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(1000, 0)
			b.Sample(now)
			ss := b.Sample(now)
			if len(ss) != 8 || ss[5].Index != 5 || !ss[5].At.Equal(now) {
				t.Fatalf("samples = %+v", ss)
			}
			tc.check(t, sampleView{Sample: ss[5], log: log.String()})
		})
	}
}

// sampleView is one GPU's sample and what was logged while sampling.
type sampleView struct {
	gpu.Sample
	log string
}

func (s sampleView) want(t *testing.T, used, total int64, util float64, temp int, power float64, ecc uint64, procs int) {
	t.Helper()
	if s.MemUsedMiB != used || s.MemMiB != total || s.UtilPct != util || s.TempC != temp ||
		s.PowerW != power || s.ECCErrors != ecc || len(s.Processes) != procs {
		t.Errorf("sample = %+v; want used %d of %d MiB, %v%%, %d°C, %vW, %d ECC errors, %d processes",
			s.Sample, used, total, util, temp, power, ecc, procs)
	}
}

func TestInitFailureMakesNoOtherCall(t *testing.T) {
	tests := []struct {
		name string
		ret  nv.Return
		want string
	}{
		{"no driver", nv.ERROR_LIBRARY_NOT_FOUND, "driver installed"},
		{"driver not loaded", nv.ERROR_DRIVER_NOT_LOADED, "not loaded"},
		{"other failure", nv.ERROR_UNKNOWN, "error 999"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Only Init is mocked: any other call would panic, as the real
			// library may crash the process after a failed Init.
			lib := &mock.Interface{InitFunc: func() nv.Return { return tc.ret }}
			_, err := New(lib, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %q", err, tc.want)
			}
			if (tc.ret == nv.ERROR_LIBRARY_NOT_FOUND) != errors.Is(err, ErrNoDriver) {
				t.Errorf("errors.Is(%v, ErrNoDriver) is wrong", err)
			}
			if len(lib.InitCalls()) != 1 {
				t.Errorf("Init called %d times", len(lib.InitCalls()))
			}
		})
	}
}

// TestOpenWithoutDriverFailsCleanly opens this machine's real NVML and
// checks the outcome against what the machine has, found without NVML
// (see nvmlHere): without the library (CI, most development machines)
// Open must fail with ErrNoDriver; with the library but no kernel driver,
// with an error naming the unloaded driver; with no access to the
// driver's control device, with one naming the permission; with all
// three, it must read at least one GPU, each whole, and close cleanly.
// Any other outcome, on any machine, fails.
func TestOpenWithoutDriverFailsCleanly(t *testing.T) {
	here := nvmlHere()
	t.Logf("this machine: %+v", here)
	b, err := Open(nil)
	if err != nil && b != nil {
		t.Errorf("Open returned a backend with its error %v", err)
	}
	var want string // the error Open must return; "" for none
	switch {
	case !here.library:
		want = ErrNoDriver.Error()
		if !errors.Is(err, ErrNoDriver) {
			t.Errorf("Open: %v; want ErrNoDriver on a machine without libnvidia-ml.so.1", err)
		}
	case !here.kernelDriver:
		want = "the NVIDIA kernel driver is not loaded"
	case !here.control:
		want = "no permission to talk to the NVIDIA driver"
	}
	if want != "" {
		if err == nil || !strings.HasPrefix(err.Error(), "nvml: ") || !strings.Contains(err.Error(), want) {
			t.Fatalf("Open: %v; want an error beginning \"nvml: \" that says %q", err, want)
		}
		return
	}
	if err != nil {
		t.Fatalf("Open: %v; want the GPUs of a machine with NVML, its kernel driver and access to it", err)
	}
	devs := b.Devices()
	if len(devs) == 0 || len(devs) > here.gpus {
		t.Errorf("Open read %d GPUs; the kernel driver knows %d", len(devs), here.gpus)
	}
	for _, d := range devs {
		if d.UUID == "" || d.Model == "" || d.MemMiB <= 0 {
			t.Errorf("GPU %d read incompletely: %+v", d.Index, d)
		}
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// nvmlMachine is what a machine has of NVML.
type nvmlMachine struct {
	library      bool // the dynamic loader finds libnvidia-ml.so.1
	kernelDriver bool // the NVIDIA kernel module is loaded
	control      bool // this process may open /dev/nvidiactl
	gpus         int  // GPUs the kernel driver knows (some may be hidden from this process)
}

// nvmlHere looks at this machine without NVML: for the library, where
// the dynamic loader looks (its cache, LD_LIBRARY_PATH and the default
// folders); for the kernel driver, /proc/driver/nvidia.
func nvmlHere() nvmlMachine {
	const lib = "libnvidia-ml.so.1"
	var m nvmlMachine
	cache, _ := os.ReadFile("/etc/ld.so.cache")
	m.library = bytes.Contains(cache, []byte(lib))
	dirs := append(filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")), "/lib", "/usr/lib", "/lib64", "/usr/lib64")
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, lib)); err == nil {
			m.library = true
		}
	}
	_, err := os.Stat("/proc/driver/nvidia/version")
	m.kernelDriver = err == nil
	gpus, _ := os.ReadDir("/proc/driver/nvidia/gpus")
	m.gpus = len(gpus)
	if f, err := os.OpenFile("/dev/nvidiactl", os.O_RDWR, 0); err == nil {
		m.control = true
		f.Close()
	}
	return m
}

func TestCloseShutsDownOnce(t *testing.T) {
	srv := fakeMachine(t, map[int]reading{0: {usedBytes: 1 << 30}})
	b, err := New(srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
	if s := b.Sample(time.Now()); len(s) != 8 || s[0].MemUsedMiB != 0 || s[0].MemMiB != 40960 {
		t.Errorf("sample after Close = %+v", s[0])
	}
}
