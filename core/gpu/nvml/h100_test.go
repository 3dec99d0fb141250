//go:build cgo

package nvml

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// h100 is testdata/h100-80gb.json: an H100's readings beside nvidia-smi's.
type h100 struct {
	Name          string `json:"name"`
	TotalMiB      uint64 `json:"total_mib"`
	ReservedBytes uint64 `json:"reserved_bytes"`
	Readings      []struct {
		What          string `json:"what"`
		V1UsedBytes   uint64 `json:"nvml_v1_used_bytes"`
		V1UsedMiB     int64  `json:"nvml_v1_used_mib"`
		NvidiaSMIMiB  int64  `json:"nvidia_smi_used_mib"`
		ProcessesSeen []struct {
			PID     uint32 `json:"pid"`
			UsedMiB uint64 `json:"used_mib"`
		} `json:"processes"`
	} `json:"readings"`
}

// h100Library is NVML as the H100's driver answered it at reading i: a
// go-nvml mock with only the calls the back end makes. A v1Only driver
// lacks the v2 memory info (before R510).
func h100Library(card h100, i int, v1Only bool) *mock.Interface {
	r := card.Readings[i]
	total := card.TotalMiB << 20
	var procs []nv.ProcessInfo
	for _, p := range r.ProcessesSeen {
		procs = append(procs, nv.ProcessInfo{Pid: p.PID, UsedGpuMemory: p.UsedMiB << 20})
	}
	dev := &mock.Device{
		GetNameFunc: func() (string, nv.Return) { return card.Name, nv.SUCCESS },
		GetUUIDFunc: func() (string, nv.Return) { return "GPU-h100", nv.SUCCESS },
		GetMemoryInfoFunc: func() (nv.Memory, nv.Return) {
			return nv.Memory{Total: total, Used: r.V1UsedBytes, Free: total - r.V1UsedBytes}, nv.SUCCESS
		},
		GetMemoryInfo_v2Func: func() (nv.Memory_v2, nv.Return) {
			if v1Only {
				return nv.Memory_v2{}, nv.ERROR_FUNCTION_NOT_FOUND
			}
			used := r.V1UsedBytes - card.ReservedBytes
			return nv.Memory_v2{Version: nv.STRUCT_VERSION(nv.Memory_v2{}, 2), Total: total, Reserved: card.ReservedBytes,
				Used: used, Free: total - card.ReservedBytes - used}, nv.SUCCESS
		},
		GetUtilizationRatesFunc:         func() (nv.Utilization, nv.Return) { return nv.Utilization{}, nv.SUCCESS },
		GetTemperatureFunc:              func(nv.TemperatureSensors) (uint32, nv.Return) { return 33, nv.SUCCESS },
		GetPowerUsageFunc:               func() (uint32, nv.Return) { return 70_000, nv.SUCCESS },
		GetTotalEccErrorsFunc:           func(nv.MemoryErrorType, nv.EccCounterType) (uint64, nv.Return) { return 0, nv.SUCCESS },
		GetComputeRunningProcessesFunc:  func() ([]nv.ProcessInfo, nv.Return) { return procs, nv.SUCCESS },
		GetGraphicsRunningProcessesFunc: func() ([]nv.ProcessInfo, nv.Return) { return nil, nv.SUCCESS },
		GetMigModeFunc:                  func() (int, int, nv.Return) { return nv.DEVICE_MIG_DISABLE, nv.DEVICE_MIG_DISABLE, nv.SUCCESS },
	}
	return &mock.Interface{
		InitFunc:                   func() nv.Return { return nv.SUCCESS },
		ShutdownFunc:               func() nv.Return { return nv.SUCCESS },
		DeviceGetCountFunc:         func() (int, nv.Return) { return 1, nv.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nv.Device, nv.Return) { return dev, nv.SUCCESS },
		EventSetCreateFunc:         func() (nv.EventSet, nv.Return) { return nil, nv.ERROR_NOT_SUPPORTED },
	}
}

// The H100 of issue 31 read as nvidia-smi reads it: used memory leaves
// out the 480 MiB the driver reserves (reported apart), within 1 MiB of
// nvidia-smi, idle or with a job; each process's memory is its own. The
// agent read 480 MiB too many with NVML's v1 memory info.
func TestH100ReadsAsNvidiaSMI(t *testing.T) {
	raw, err := os.ReadFile("testdata/h100-80gb.json")
	if err != nil {
		t.Fatal(err)
	}
	var card h100
	if err := json.Unmarshal(raw, &card); err != nil {
		t.Fatal(err)
	}
	if len(card.Readings) == 0 {
		t.Fatal("no readings in testdata/h100-80gb.json")
	}
	for i, r := range card.Readings {
		for _, v1Only := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/v1 only %v", r.What, v1Only), func(t *testing.T) {
				var log bytes.Buffer
				b, err := New(h100Library(card, i, v1Only), quietLogger(&log))
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				if d := b.Devices(); len(d) != 1 || d[0].MemMiB != int64(card.TotalMiB) || d[0].Model != card.Name {
					t.Fatalf("devices = %+v", d)
				}
				s := b.Sample(time.Unix(1000, 0))[0]
				if v1Only {
					// All such a driver tells: the v1 figure, as before.
					if s.MemUsedMiB != r.V1UsedMiB || s.MemReservedMiB != 0 {
						t.Errorf("v1 driver: used %d, reserved %d MiB; want %d and 0", s.MemUsedMiB, s.MemReservedMiB, r.V1UsedMiB)
					}
					return
				}
				if d := s.MemUsedMiB - r.NvidiaSMIMiB; math.Abs(float64(d)) > 1 {
					t.Errorf("used %d MiB, nvidia-smi %d MiB", s.MemUsedMiB, r.NvidiaSMIMiB)
				}
				if s.MemReservedMiB != int64(card.ReservedBytes>>20) {
					t.Errorf("reserved %d MiB, want %d", s.MemReservedMiB, card.ReservedBytes>>20)
				}
				if len(s.Processes) != len(r.ProcessesSeen) {
					t.Fatalf("processes %+v, want %d", s.Processes, len(r.ProcessesSeen))
				}
				for k, p := range r.ProcessesSeen {
					if got := s.Processes[k]; got.PID != int(p.PID) || got.MemMiB != int64(p.UsedMiB) {
						t.Errorf("process %+v, want pid %d with %d MiB", got, p.PID, p.UsedMiB)
					}
				}
			})
		}
	}
}
