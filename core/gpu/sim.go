package gpu

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
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
	// UtilPct, when set, is the job's GPU utilization (0 to 100) all
	// along: a job that holds its GPUs and barely uses them (a notebook,
	// a stuck input pipeline) sets it near 0. Unset, utilization follows
	// a training iteration (UtilAt).
	UtilPct *float64
}

// UtilAt is the job's GPU utilization at elapsed time since it started:
// UtilPct where set; otherwise a training job's, near full while it
// computes (94-99%) and low (25-45%) in about one second in eight, while
// its input pipeline stalls or gradients are synchronized: about 88% on
// average. Which seconds stall, and the jitter of each reading, are the
// same for the same job and second, so readings look measured and a
// sampler's period does not alias with the job's iterations.
func (m SimMemory) UtilAt(id int64, elapsed time.Duration) float64 {
	j := jitter(id, elapsed)
	if m.UtilPct != nil {
		u := *m.UtilPct
		return min(100, max(0, u+j*min(3, u/2)))
	}
	if jitter(^id, elapsed) < -0.75 {
		return 35 + 10*j
	}
	return 96.5 + 2.5*j
}

// jitter is a number in [-1, 1] fixed by job and second.
func jitter(id int64, elapsed time.Duration) float64 {
	x := uint64(id)*0x9E3779B97F4A7C15 ^ uint64(elapsed/time.Second)*0xBF58476D1CE4E5B9
	x ^= x >> 31
	x *= 0x94D049BB133111EB
	x ^= x >> 29
	return float64(x%2001)/1000 - 1
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

// SimulatedModel begins the model name of every simulated GPU: their
// readings are the simulator's, whatever runs on them.
const SimulatedModel = "Simulated GPU"

// Simulated reports whether d is a simulated GPU (its model says so, on
// this machine or as a remote agent reported it).
func Simulated(d Device) bool {
	return strings.HasPrefix(d.Model, SimulatedModel)
}

// NewSim returns count simulated GPUs of memMiB each, named after node.
func NewSim(node string, count int, memMiB int64) *Sim {
	s := &Sim{node: node, jobs: make(map[int][]simJob), errs: make(map[int]simErrors)}
	for i := range count {
		s.devices = append(s.devices, Device{
			Index:  i,
			UUID:   fmt.Sprintf("GPU-sim-%s-%d", node, i),
			Model:  fmt.Sprintf("%s %d GB", SimulatedModel, memMiB/1024),
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
			// Jobs sharing a GPU take turns on it: together they keep
			// it as busy as the busiest, and a little more.
			smp.UtilPct = min(100, max(smp.UtilPct, j.utilAt(now))+float64(len(smp.Jobs)-1)*2)
		}
		// An idle GPU sits cool; a busy one heats up and draws power with
		// its utilization.
		smp.TempC, smp.PowerW = simIdleTempC, simIdlePowerW
		smp.UtilPct = math.Round(smp.UtilPct*10) / 10
		smp.TempC += int(smp.UtilPct * 0.4)
		smp.PowerW += 3 * smp.UtilPct
		sort.Slice(smp.Jobs, func(a, b int) bool { return smp.Jobs[a].JobID < smp.Jobs[b].JobID })
		out = append(out, smp)
	}
	return out
}

// SimCluster is a cluster of simulated machines as serve --sim-gpus and
// agent --gpus sim: name it: NODESxGPUSxGB.
type SimCluster struct {
	Nodes, GPUs int
	MemGB       int64
}

// ParseSimCluster reads NODESxGPUSxGB, each a number from 1 to 4096.
func ParseSimCluster(s string) (SimCluster, error) {
	parts := strings.Split(s, "x")
	if len(parts) != 3 {
		return SimCluster{}, fmt.Errorf("%q: want NODESxGPUSxGB, for example 2x4x80", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 || v > 4096 {
			return SimCluster{}, fmt.Errorf("%q: %q is not a number from 1 to 4096", s, p)
		}
		n[i] = v
	}
	return SimCluster{Nodes: n[0], GPUs: n[1], MemGB: int64(n[2])}, nil
}
