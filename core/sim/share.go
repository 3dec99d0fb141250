package sim

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/salussim"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// Salus sharing in the simulator (Config.Sharing, docs/salus.md). Under
// salus, a fractional job (one GPU, gpu_milli below 1,000) is a sharing
// job: its memory is core/salussim's model (gpu_milli/1,000 of the
// smallest GPU, 20% persistent), padded as in production, and the
// scheduler co-locates it where the safety condition holds. A job too
// large once padded runs alone. Each shared GPU keeps its jobs in a
// core/lanes GPU: a start the lanes refuse is a scheduler bug and stops
// the run. Co-located jobs take turns in each lane by the lane policy
// (Config.LanePolicy, see laneTurns), and the running jobs of a GPU's
// lanes share its compute (salussim.Rate). When a job leaves, jobs that
// shared a lane get lanes of their own where memory allows (Spread).

// shareState is the simulator's sharing state; nil under SharingNone.
type shareState struct {
	memMiB int64                 // the GPU memory estimates are shares of
	policy lanes.Policy          // who runs next in a lane
	gpus   map[gpu.Ref]*shareGPU // GPUs hosting sharing jobs
	seq    int                   // admissions so far: pack's order
	jobs   int                   // sharing jobs
	joins  int                   // starts on a GPU that already hosted a job
	most   int                   // most jobs on one GPU at once
}

// shareGPU is one GPU's sharing jobs. seq is each job's admission
// number; gpuTime the lane time each had since its admission, up to since
// (fair's measure), and share the part of its lane's time it has now.
// epoch counts retimes: a scheduled retime of an older epoch is stale.
type shareGPU struct {
	lg      *lanes.GPU
	jobs    map[int64]*job
	seq     map[int64]int
	gpuTime map[int64]float64
	share   map[int64]float64
	since   float64
	epoch   int
}

// accrue brings every job's lane time up to now.
func (g *shareGPU) accrue(now float64) {
	for id, sh := range g.share {
		g.gpuTime[id] += sh * (now - g.since)
	}
	g.since = now
}

// newShareState turns on sharing: GPUs of unknown memory get
// salussim.DefaultGPUMemMiB, and estimates are shares of the smallest.
// Count placement names no GPU, so nothing could share: refused.
func newShareState(cfg Config, nodes []sched.Node) (*shareState, error) {
	policy, err := lanes.ParsePolicy(string(cfg.LanePolicy))
	if err != nil {
		return nil, err
	}
	mode := cfg.Sharing
	if mode == "" {
		mode = salussim.SharingNone
	}
	if _, err := salussim.ParseSharing(string(mode)); err != nil {
		return nil, err
	}
	if mode == salussim.SharingNone {
		return nil, nil
	}
	if cfg.Sched.Placement == sched.PlaceCount {
		return nil, fmt.Errorf("sharing %s needs placement %s: %s names no GPU to share", mode, sched.PlaceNodes, sched.PlaceCount)
	}
	st := &shareState{gpus: map[gpu.Ref]*shareGPU{}, policy: policy}
	for i := range nodes {
		nodes[i].GPUs = append([]sched.GPU(nil), nodes[i].GPUs...)
		for k := range nodes[i].GPUs {
			g := &nodes[i].GPUs[k]
			if g.MemMiB <= 0 {
				g.MemMiB = salussim.DefaultGPUMemMiB
			}
			if st.memMiB == 0 || g.MemMiB < st.memMiB {
				st.memMiB = g.MemMiB
			}
		}
	}
	return st, nil
}

// shareJob marks a fractional job as a sharing one in its scheduler view.
func (s *simulator) shareJob(j *job, sj *sched.Job) {
	if s.share == nil || !salussim.Fractional(*j.tj) {
		return
	}
	mem := memest.Padding{}.Apply(salussim.Memory(*j.tj, s.share.memMiB, 0))
	if mem.TotalMiB() > s.share.memMiB {
		return // too large once padded: runs alone
	}
	sj.Sharing, sj.MemPersistentMiB, sj.MemEphemeralMiB = true, mem.PersistentMiB, mem.EphemeralMiB
	j.demand = float64(j.tj.GPUMilli) / 1000
	// It asked for gpu_milli/1,000 of a GPU, as a portal job asks for
	// gpu_fraction: the share it holds (usage.Shares).
	sj.GPUFraction = j.demand
	s.share.jobs++
}

// shareStart puts a sharing job that just started into its GPU's lanes
// and retimes the GPU's jobs.
func (s *simulator) shareStart(j *job) error {
	sj := &s.snap[j.pos]
	if s.share == nil || !sj.Sharing || len(j.gpus) != 1 {
		return nil
	}
	ref := j.gpus[0]
	g := s.share.gpus[ref]
	if g == nil {
		lg, err := lanes.NewGPU(len(s.share.gpus), s.gpuMemMiB(ref), lanes.Config{Padding: memest.NoPadding, AgingS: -1})
		if err != nil {
			return err
		}
		g = &shareGPU{lg: lg, jobs: map[int64]*job{}, seq: map[int64]int{},
			gpuTime: map[int64]float64{}, share: map[int64]float64{}, since: s.now}
		s.share.gpus[ref] = g
	}
	mem := memest.Estimate{PersistentMiB: sj.MemPersistentMiB, EphemeralMiB: sj.MemEphemeralMiB, Source: memest.Declared}
	if _, err := g.lg.Admit(lanes.Job{ID: j.tj.ID, Memory: mem}, s.now); err != nil {
		return fmt.Errorf("GPU %s/%d breaks the safety condition: %w", ref.Node, ref.Index, err)
	}
	if len(g.jobs) > 0 {
		s.share.joins++
	}
	g.jobs[j.tj.ID] = j
	s.share.seq++
	g.seq[j.tj.ID] = s.share.seq
	s.share.most = max(s.share.most, len(g.jobs))
	s.shareRetime(g)
	return nil
}

// shareStop takes a sharing job out of its GPU's lanes when its run ends.
func (s *simulator) shareStop(j *job) {
	if s.share == nil || len(j.gpus) != 1 {
		return
	}
	g := s.share.gpus[j.gpus[0]]
	if g == nil || g.jobs[j.tj.ID] == nil {
		return
	}
	g.accrue(s.now)
	delete(g.jobs, j.tj.ID)
	delete(g.seq, j.tj.ID)
	delete(g.gpuTime, j.tj.ID)
	delete(g.share, j.tj.ID)
	_ = g.lg.Release(j.tj.ID) // the job is there: g.jobs says so
	j.shareRate, j.waitsLane = 0, false
	if len(g.jobs) == 0 {
		g.epoch++ // no retime is due any more
		delete(s.share.gpus, j.gpus[0])
		return
	}
	g.lg.Spread()
	s.shareRetime(g)
}

// shareRetime gives every job on g its speed: each lane's turns go by
// the lane policy (laneTurns), and the running jobs of the GPU's lanes
// share its compute (salussim.Rate). A job whose speed changes closes its
// run so far and goes on at the new speed; a waiting job (speed 0) gets
// its completion when it runs again. Under fair, a retime is also due
// when the jobs that run catch up with the next least served one.
func (s *simulator) shareRetime(g *shareGPU) {
	g.accrue(s.now)
	g.epoch++
	v := g.lg.View()
	share := make(map[int64]float64, len(g.jobs))
	var demand float64
	catchUp := math.Inf(1)
	for _, l := range v.Lanes {
		d, next := s.laneTurns(g, l, share)
		demand += d
		catchUp = min(catchUp, next)
	}
	rate := salussim.Rate(demand, len(g.jobs), 0)
	s.shareHeld(g)
	var first *job
	for _, l := range v.Lanes {
		for _, jv := range l.Jobs {
			j := g.jobs[jv.ID]
			g.share[jv.ID] = share[jv.ID]
			if first == nil || j.order < first.order {
				first = j
			}
			r := rate * share[jv.ID]
			if r == j.shareSpeed() {
				continue
			}
			ran := s.now - j.runStart
			j.account(ran)
			s.busy += float64(j.tj.GPUs) * ran
			j.runStart = s.now
			j.shareRate, j.waitsLane = r, r == 0
			j.run++
			if r > 0 {
				s.ends.push(completion{at: s.now + j.remaining(), job: j, run: j.run})
			}
		}
	}
	if !math.IsInf(catchUp, 1) {
		s.ends.push(completion{at: s.now + catchUp, job: first, lane: g, epoch: g.epoch})
	}
}

// shareHeld gives every job on g the share of it that usage.Shares gives
// it among the jobs on g (each asked for its gpu_milli): what it attains
// service by from now on, as the portal counts a shared GPU.
func (s *simulator) shareHeld(g *shareGPU) {
	ids := slices.Sorted(maps.Keys(g.jobs))
	claims := make([]usage.Claim, len(ids))
	for k, id := range ids {
		claims[k] = usage.Claim{Sharing: true, Fraction: g.jobs[id].demand}
	}
	for k, h := range usage.Shares(nil, claims) {
		j := g.jobs[ids[k]]
		if j.acc.Held != h {
			j.acc = j.acc.Reheld(s.now-j.runStart, h)
		}
	}
}

// sameTime is how close two lane times must be to count as equal under
// fair: float error, far below a second.
const sameTime = 1e-6

// laneTurns sets, in share, the part of lane l's time each of its jobs
// gets from now on, by the lane policy (core/lanes, Policy), with every
// job always ready for its next iteration:
//
//   - pack: the job admitted first runs; the others wait (arrival order).
//   - fair: the jobs with the least lane time so far take turns, in equal
//     parts: the fluid limit of iterations given to the least served.
//     They catch up with the next least served after catchUp seconds.
//   - srtf: the job with the least work left runs, then the one admitted
//     first; the trace knows every duration, so every job has an
//     estimate. The running job's work left only shrinks, so the turns
//     change only when a job joins or leaves.
//
// demand is the compute the lane asks of the GPU: its running job's, or
// under fair the mean of the jobs taking turns. catchUp is +Inf when no
// retime is due.
func (s *simulator) laneTurns(g *shareGPU, l lanes.LaneView, share map[int64]float64) (demand, catchUp float64) {
	catchUp = math.Inf(1)
	if s.share.policy == lanes.Fair {
		least, next := math.Inf(1), math.Inf(1)
		for _, jv := range l.Jobs {
			least = min(least, g.gpuTime[jv.ID])
		}
		var turns []int64
		for _, jv := range l.Jobs {
			if t := g.gpuTime[jv.ID]; t <= least+sameTime {
				turns = append(turns, jv.ID)
			} else {
				next = min(next, t)
			}
		}
		k := float64(len(turns))
		for _, id := range turns {
			share[id] = 1 / k
			demand += g.jobs[id].demand / k
		}
		if !math.IsInf(next, 1) {
			catchUp = (next - least) * k
		}
		return demand, catchUp
	}
	var run *job
	for _, jv := range l.Jobs {
		j := g.jobs[jv.ID]
		switch {
		case run == nil:
			run = j
		case s.share.policy == lanes.Pack:
			if g.seq[jv.ID] < g.seq[run.tj.ID] {
				run = j
			}
		case j.workLeft(s.now) < run.workLeft(s.now):
			run = j
		}
	}
	share[run.tj.ID] = 1
	return run.demand, catchUp
}

// workLeft is the work a running job has left at now: restore time
// owed plus solo seconds of progress, at its current speed since
// runStart.
func (j *job) workLeft(now float64) float64 {
	ran := now - j.runStart
	paid := min(j.owed, ran)
	return j.owed - paid + max(0, j.tj.Duration-j.progress-(ran-paid)*j.rate()*j.shareSpeed())
}

// shareSpeed is the job's speed from sharing its GPU: 1 when it has the
// GPU to itself, 0 while it waits for its lane.
func (j *job) shareSpeed() float64 {
	switch {
	case j.waitsLane:
		return 0
	case j.shareRate > 0:
		return j.shareRate
	}
	return 1
}

// gpuMemMiB is the memory of GPU ref.
func (s *simulator) gpuMemMiB(ref gpu.Ref) int64 {
	for _, n := range s.nodes {
		if n.Name != ref.Node {
			continue
		}
		for _, g := range n.GPUs {
			if g.Index == ref.Index {
				return g.MemMiB
			}
		}
	}
	return s.share.memMiB
}

// shareResult fills the sharing figures of r.
func (s *simulator) shareResult(r *Result) {
	if s.occupied > 0 {
		r.GPUUtilization = 0
		if r.Makespan > 0 {
			r.GPUUtilization = min(1, s.occupied/(float64(s.gpus.total)*r.Makespan))
		}
		r.JobsPerBusyGPU = s.busy / s.occupied
	}
	if s.share == nil {
		return
	}
	r.Sharing = string(salussim.SharingSalus)
	r.LanePolicy = string(s.share.policy)
	r.SharePlacement = s.cfg.Sched.SharePlacement
	if r.SharePlacement == "" {
		r.SharePlacement = sched.ShareFreeFirst
	}
	r.SharingJobs, r.CoLocations, r.MaxJobsPerGPU = s.share.jobs, s.share.joins, s.share.most
}

// writeShareTable prints, for runs with sharing, one row per policy.
func writeShareTable(w io.Writer, results []*Result) error {
	if !slices.ContainsFunc(results, func(r *Result) bool { return r.Sharing != "" }) {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tsharing\tlane policy\tshare placement\tsharing jobs\tco-locations\tmost jobs per GPU\tjobs per busy GPU\tGPU util\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.3f\t%.3f\t\n",
			r.Policy, r.Sharing, r.LanePolicy, r.SharePlacement, r.SharingJobs, r.CoLocations, r.MaxJobsPerGPU, r.JobsPerBusyGPU, r.GPUUtilization)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}
