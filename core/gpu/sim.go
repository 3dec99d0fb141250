package gpu

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"
)

// SimMemory models a training job's GPU memory over iterations, after
// SuperNeurons and Salus: Persistent memory (weights, optimizer state) is
// held for the whole run; Ephemeral memory (activations) grows during each
// forward pass and is freed at the end of the iteration.
type SimMemory struct {
	PersistentMiB int64
	EphemeralMiB  int64
	Iteration     time.Duration
}

// At returns the memory held at elapsed time since the job started.
func (m SimMemory) At(elapsed time.Duration) int64 {
	if m.Iteration <= 0 {
		return m.PersistentMiB + m.EphemeralMiB
	}
	phase := float64(elapsed%m.Iteration) / float64(m.Iteration)
	// Activations build up over the first 60% (forward pass), then are
	// released during the backward pass.
	frac := phase / 0.6
	if phase > 0.6 {
		frac = (1 - phase) / 0.4
	}
	return m.PersistentMiB + int64(math.Round(frac*float64(m.EphemeralMiB)))
}

// A simulated GPU's temperature and power draw when idle.
const (
	simIdleTempC  = 34
	simIdlePowerW = 55.0
)

// Sim is a simulated machine's GPUs. Jobs are attached to GPUs when they
// start and detached when they stop; samples follow their memory models.
type Sim struct {
	node    string
	devices []Device

	mu     sync.Mutex
	jobs   map[int][]simJob // by GPU index
	errs   map[int]simErrors
	faults []*simFault // injected, to fire later
}

type simJob struct {
	id    int64
	mem   SimMemory
	start time.Time
	// gated jobs share the GPU through lanes (simlanes.go): their
	// ephemeral memory is there only during an iteration, from iterStart.
	gated     bool
	iterStart time.Time
}

// NewSim returns count simulated GPUs of memMiB each, named after node.
func NewSim(node string, count int, memMiB int64) *Sim {
	s := &Sim{node: node, jobs: make(map[int][]simJob), errs: make(map[int]simErrors)}
	for i := range count {
		s.devices = append(s.devices, Device{
			Index:  i,
			UUID:   fmt.Sprintf("GPU-sim-%s-%d", node, i),
			Model:  fmt.Sprintf("Simulated GPU %d GB", memMiB/1024),
			MemMiB: memMiB,
		})
	}
	return s
}

// Devices implements Backend.
func (s *Sim) Devices() []Device { return append([]Device(nil), s.devices...) }

// Attach puts job id on the given GPUs from start on.
func (s *Sim) Attach(id int64, gpus []int, mem SimMemory, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range gpus {
		s.jobs[g] = append(s.jobs[g], simJob{id: id, mem: mem, start: start})
		s.armFaultsLocked(g, start)
	}
}

// Detach removes job id from every GPU.
func (s *Sim) Detach(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for g, js := range s.jobs {
		kept := js[:0]
		for _, j := range js {
			if j.id != id {
				kept = append(kept, j)
			}
		}
		s.jobs[g] = kept
	}
}

// Sample implements Backend.
func (s *Sim) Sample(now time.Time) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fireFaultsLocked(now)
	out := make([]Sample, 0, len(s.devices))
	for _, d := range s.devices {
		smp := Sample{At: now, Index: d.Index, MemMiB: d.MemMiB}
		errs := s.errs[d.Index]
		smp.ECCErrors, smp.XIDErrors, smp.LastXID = errs.ecc, errs.xids, errs.lastXID
		for _, j := range s.jobs[d.Index] {
			m := min(j.memAt(now), d.MemMiB-smp.MemUsedMiB)
			smp.MemUsedMiB += m
			smp.Jobs = append(smp.Jobs, JobMem{JobID: j.id, MemMiB: m})
		}
		// An idle GPU sits cool; a busy one heats up and draws power with
		// its utilization.
		smp.TempC, smp.PowerW = simIdleTempC, simIdlePowerW
		if len(smp.Jobs) > 0 {
			smp.UtilPct = min(100, 85+5*float64(len(smp.Jobs)))
			smp.TempC += int(smp.UtilPct * 0.4)
			smp.PowerW += 3 * smp.UtilPct
		}
		sort.Slice(smp.Jobs, func(a, b int) bool { return smp.Jobs[a].JobID < smp.Jobs[b].JobID })
		out = append(out, smp)
	}
	return out
}
