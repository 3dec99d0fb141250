package sim

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/salussim"
	"github.com/gpuportal/gpuportal/core/sched"
)

// Salus sharing in the simulator (Config.Sharing, docs/salus.md). Under
// salus, a fractional job (one GPU, gpu_milli below 1,000) is a sharing
// job: its memory is core/salussim's model (gpu_milli/1,000 of the
// smallest GPU, 20% persistent), padded as in production, and the
// scheduler co-locates it where the safety condition holds. A job too
// large once padded runs alone. Each shared GPU keeps its jobs in a
// core/lanes GPU: a start the lanes refuse is a scheduler bug and stops
// the run. Co-located jobs slow down as in core/salussim's srtf lanes: in
// each lane the job with the least work left runs and the others wait,
// and the running jobs of a GPU's lanes share its compute
// (salussim.Rate). When a job leaves, jobs that shared a lane get lanes of
// their own where memory allows (Spread).

// shareState is the simulator's sharing state; nil under SharingNone.
type shareState struct {
	memMiB int64                      // the GPU memory estimates are shares of
	gpus   map[sched.GPURef]*shareGPU // GPUs hosting sharing jobs
	jobs   int                        // sharing jobs
	joins  int                        // starts on a GPU that already hosted a job
	most   int                        // most jobs on one GPU at once
}

// shareGPU is one GPU's sharing jobs.
type shareGPU struct {
	lg   *lanes.GPU
	jobs map[int64]*job
}

// newShareState turns on sharing: GPUs of unknown memory get
// salussim.DefaultGPUMemMiB, and estimates are shares of the smallest.
// Count placement names no GPU, so nothing could share: refused.
func newShareState(cfg Config, nodes []sched.Node) (*shareState, error) {
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
	st := &shareState{gpus: map[sched.GPURef]*shareGPU{}}
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
		g = &shareGPU{lg: lg, jobs: map[int64]*job{}}
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
	delete(g.jobs, j.tj.ID)
	_ = g.lg.Release(j.tj.ID) // the job is there: g.jobs says so
	j.shareRate, j.waitsLane = 0, false
	if len(g.jobs) == 0 {
		delete(s.share.gpus, j.gpus[0])
		return
	}
	g.lg.Spread()
	s.shareRetime(g)
}

// shareRetime gives every job on g its speed, as core/salussim's srtf
// lanes would: in each lane the job with the least work left runs (then
// the one admitted first), and the others wait their turn; the running
// jobs of the GPU's lanes share its compute (salussim.Rate). A job whose
// speed changes closes its run so far and goes on at the new speed; a
// waiting job (speed 0) gets its completion when it runs again.
func (s *simulator) shareRetime(g *shareGPU) {
	v := g.lg.View()
	run := make([]*job, len(v.Lanes))
	var demand float64
	for k, l := range v.Lanes {
		for _, jv := range l.Jobs {
			j := g.jobs[jv.ID]
			if run[k] == nil || j.workLeft(s.now) < run[k].workLeft(s.now) {
				run[k] = j
			}
		}
		demand += run[k].demand
	}
	rate := salussim.Rate(demand, len(g.jobs), 0)
	for k, l := range v.Lanes {
		for _, jv := range l.Jobs {
			j := g.jobs[jv.ID]
			r := 0.0
			if j == run[k] {
				r = rate
			}
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
func (s *simulator) gpuMemMiB(ref sched.GPURef) int64 {
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
	r.SharingJobs, r.CoLocations, r.MaxJobsPerGPU = s.share.jobs, s.share.joins, s.share.most
}

// writeShareTable prints, for runs with sharing, one row per policy.
func writeShareTable(w io.Writer, results []*Result) error {
	if !slices.ContainsFunc(results, func(r *Result) bool { return r.Sharing != "" }) {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tsharing\tsharing jobs\tco-locations\tmost jobs per GPU\tjobs per busy GPU\tGPU util\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.3f\t%.3f\t\n",
			r.Policy, r.Sharing, r.SharingJobs, r.CoLocations, r.MaxJobsPerGPU, r.JobsPerBusyGPU, r.GPUUtilization)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}
