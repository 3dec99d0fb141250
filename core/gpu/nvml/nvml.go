//go:build cgo

// Package nvml reads NVIDIA GPUs through NVML (github.com/NVIDIA/go-nvml):
// each GPU's identity, and once a second its memory, utilization,
// temperature, power draw, uncorrected ECC errors, critical XID errors
// (through NVML's event set) and the memory of each process on it.
//
// go-nvml needs cgo, so this package builds only with cgo, and the
// gpuportal binary includes it only when built with the nvml build tag
// (go build -tags nvml ./cmd/gpuportal); the default build stays cgo-free.
// The NVML library itself is loaded at run time, from the driver.
package nvml

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// ErrNoDriver is returned by Open on a machine without the NVIDIA driver.
var ErrNoDriver = errors.New("NVML library not found: is the NVIDIA driver installed?")

// Backend reads a machine's NVIDIA GPUs. It implements gpu.Backend.
type Backend struct {
	lib  nv.Interface
	log  *slog.Logger
	devs []nv.Device
	info []gpu.Device

	mu     sync.Mutex
	closed bool
	warned map[string]bool // readings that failed, each logged once
	v1Only []bool          // by GPU: the driver has no v2 memory info
	events nv.EventSet     // XID events; nil where NVML gives none
	xids   []xidState      // by GPU
}

var _ gpu.Backend = (*Backend)(nil)

// Open loads the machine's NVML library and reads its GPUs.
func Open(log *slog.Logger) (*Backend, error) {
	return New(nv.New(), log)
}

// New initializes lib and reads its GPUs: lib is the machine's library
// (nvml.New()) or go-nvml's mock. When Init fails, New makes no other call
// on lib: after a failed Init, any NVML call (even Shutdown) may crash the
// process.
func New(lib nv.Interface, log *slog.Logger) (*Backend, error) {
	if log == nil {
		log = slog.Default()
	}
	if ret := lib.Init(); ret != nv.SUCCESS {
		return nil, initError(ret)
	}
	b := &Backend{lib: lib, log: log, warned: make(map[string]bool)}
	if err := b.readDevices(); err != nil {
		_ = lib.Shutdown()
		return nil, err
	}
	b.openEvents()
	return b, nil
}

// initError explains a failed Init without asking the library, which may
// not be loaded, for the error's text.
func initError(ret nv.Return) error {
	switch ret {
	case nv.ERROR_LIBRARY_NOT_FOUND:
		return fmt.Errorf("nvml: %w", ErrNoDriver)
	case nv.ERROR_DRIVER_NOT_LOADED:
		return errors.New("nvml: init: the NVIDIA kernel driver is not loaded")
	case nv.ERROR_NO_PERMISSION:
		return errors.New("nvml: init: no permission to talk to the NVIDIA driver")
	default:
		return fmt.Errorf("nvml: init failed with NVML error %d", int32(ret))
	}
}

func (b *Backend) readDevices() error {
	n, ret := b.lib.DeviceGetCount()
	if ret != nv.SUCCESS {
		return fmt.Errorf("nvml: count GPUs: %v", ret)
	}
	for i := range n {
		d, ret := b.lib.DeviceGetHandleByIndex(i)
		if ret != nv.SUCCESS {
			return fmt.Errorf("nvml: GPU %d: %v", i, ret)
		}
		name, ret := d.GetName()
		if ret != nv.SUCCESS {
			return fmt.Errorf("nvml: GPU %d: name: %v", i, ret)
		}
		uuid, ret := d.GetUUID()
		if ret != nv.SUCCESS {
			return fmt.Errorf("nvml: GPU %d: UUID: %v", i, ret)
		}
		mem, ret := d.GetMemoryInfo()
		if ret != nv.SUCCESS {
			return fmt.Errorf("nvml: GPU %d: memory: %v", i, ret)
		}
		b.devs = append(b.devs, d)
		b.v1Only = append(b.v1Only, false)
		b.info = append(b.info, gpu.Device{Index: i, UUID: uuid, Model: name, MemMiB: mib(mem.Total)})
	}
	return nil
}

// Devices implements gpu.Backend.
func (b *Backend) Devices() []gpu.Device { return append([]gpu.Device(nil), b.info...) }

// Sample implements gpu.Backend. A reading a GPU does not support is left
// zero; other failed readings are logged once each.
func (b *Backend) Sample(now time.Time) []gpu.Sample {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]gpu.Sample, len(b.devs))
	if !b.closed {
		b.readEvents()
	}
	for i, d := range b.devs {
		s := gpu.Sample{At: now, Index: i, MemMiB: b.info[i].MemMiB}
		if b.closed {
			out[i] = s
			continue
		}
		b.readMemory(i, d, &s)
		if u, ret := d.GetUtilizationRates(); b.ok(i, "utilization", ret) {
			s.UtilPct = float64(u.Gpu)
		}
		if t, ret := d.GetTemperature(nv.TEMPERATURE_GPU); b.ok(i, "temperature", ret) {
			s.TempC = int(t)
		}
		if mw, ret := d.GetPowerUsage(); b.ok(i, "power", ret) {
			s.PowerW = float64(mw) / 1000
		}
		if n, ret := d.GetTotalEccErrors(nv.MEMORY_ERROR_TYPE_UNCORRECTED, nv.VOLATILE_ECC); b.ok(i, "ECC errors", ret) {
			s.ECCErrors = n
		}
		s.XIDErrors, s.LastXID = b.xids[i].count, b.xids[i].last
		s.Processes = b.processes(i, d)
		out[i] = s
	}
	return out
}

// readMemory reads a GPU's memory as nvidia-smi and DCGM give it: NVML's
// v2 memory info, whose used memory leaves out what the driver reserves
// for itself (reported apart). Where the driver has no v2 (before R510),
// the v1 reading is all there is, and its used memory counts the
// reserved: on an H100 80GB, 480 MiB on an idle GPU.
func (b *Backend) readMemory(i int, d nv.Device, s *gpu.Sample) {
	if !b.v1Only[i] {
		mem, ret := d.GetMemoryInfo_v2()
		switch ret {
		case nv.SUCCESS:
			s.MemUsedMiB, s.MemReservedMiB, s.MemMiB = mib(mem.Used), mib(mem.Reserved), mib(mem.Total)
			return
		case nv.ERROR_NOT_SUPPORTED, nv.ERROR_FUNCTION_NOT_FOUND, nv.ERROR_ARGUMENT_VERSION_MISMATCH:
			b.v1Only[i] = true
			b.log.Info("the driver gives no v2 memory info: a GPU's used memory includes what the driver reserves",
				"gpu", i, "uuid", b.info[i].UUID, "err", ret.Error())
		default:
			b.ok(i, "memory", ret)
			return
		}
	}
	if mem, ret := d.GetMemoryInfo(); b.ok(i, "memory", ret) {
		s.MemUsedMiB, s.MemMiB = mib(mem.Used), mib(mem.Total)
	}
}

// processes lists the compute and graphics processes on a GPU with their
// memory, each once.
func (b *Backend) processes(i int, d nv.Device) []gpu.ProcMem {
	var out []gpu.ProcMem
	seen := make(map[uint32]bool)
	add := func(ps []nv.ProcessInfo) {
		for _, p := range ps {
			if seen[p.Pid] {
				continue
			}
			seen[p.Pid] = true
			pm := gpu.ProcMem{PID: int(p.Pid)}
			// Where the driver cannot tell (some containers and
			// virtual machines), it says "not available".
			if p.UsedGpuMemory != memNotAvailable {
				pm.MemMiB = mib(p.UsedGpuMemory)
			}
			out = append(out, pm)
		}
	}
	if ps, ret := d.GetComputeRunningProcesses(); b.ok(i, "compute processes", ret) {
		add(ps)
	}
	if ps, ret := d.GetGraphicsRunningProcesses(); b.ok(i, "graphics processes", ret) {
		add(ps)
	}
	return out
}

// ok reports whether a reading succeeded, logging a failure once per GPU
// and reading. Readings a GPU does not support are not failures.
func (b *Backend) ok(i int, what string, ret nv.Return) bool {
	if ret == nv.SUCCESS {
		return true
	}
	if ret == nv.ERROR_NOT_SUPPORTED {
		return false
	}
	key := fmt.Sprintf("%d/%s", i, what)
	if !b.warned[key] {
		b.warned[key] = true
		b.log.Warn("cannot read a GPU", "gpu", i, "uuid", b.info[i].UUID, "reading", what, "err", ret.Error())
	}
	return false
}

// Close shuts NVML down. Samples after Close hold only each GPU's size.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.closeEvents()
	if ret := b.lib.Shutdown(); ret != nv.SUCCESS {
		return fmt.Errorf("nvml: shutdown: %v", ret)
	}
	return nil
}

// memNotAvailable is NVML_VALUE_NOT_AVAILABLE as an unsigned long long.
const memNotAvailable = math.MaxUint64

func mib(bytes uint64) int64 { return int64(bytes >> 20) }
