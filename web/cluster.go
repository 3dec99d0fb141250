package web

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

func (s *Server) cluster(c echo.Context) (templates.Cluster, error) {
	var out templates.Cluster
	counts, err := s.cfg.Store.CountJobsByState(c.Request().Context())
	if err != nil {
		return out, err
	}
	for _, st := range job.States {
		out.Counts = append(out.Counts, templates.Count{Label: string(st), N: counts[st]})
	}
	now := s.cfg.Now()
	state := make(map[string]string)
	for _, st := range s.cfg.Engine.NodeStatuses() {
		state[st.Name] = nodeJSON(st).State
	}
	u := currentUser(c)
	admin := u.Role == models.RoleAdmin
	m, err := s.runningMoment(c.Request().Context()) // its GPUs' holders and idle jobs: the running jobs alone
	if err != nil {
		return out, err
	}
	idleJobs, idleSt, err := s.idleJobs(c.Request().Context(), m, "")
	if err != nil {
		return out, err
	}
	out.Idle = idleRows(m, u, idleJobs, idleSt)
	idleOn := map[string][]string{} // "node:index" -> "job 3 idle 34m"
	for _, j := range idleJobs {
		for _, p := range j.Placement {
			idleOn[p] = append(idleOn[p], fmt.Sprintf("job %d %s", j.ID, idleSt[j.ID].Short(m.now)))
		}
	}
	faults := gpuFaults(s.cfg.Engine)
	gl := s.gpuLanes()
	allocs := s.cfg.Engine.NodeAllocations()
	reserved := s.cfg.Engine.ReservedGPUs()
	ages := s.heartbeatAges(time.Now())
	shown := make([]shownNode, 0, len(state))
	for _, n := range s.cfg.Engine.Nodes() {
		shown = append(shown, n)
	}
	for _, g := range s.cfg.Engine.GoneNodes() {
		state[g.Status.Name] = "disconnected"
		shown = append(shown, lastKnown{g})
	}
	for _, n := range shown {
		card := templates.NodeCard{Name: n.Name(), State: state[n.Name()], CanDrain: admin}
		if en, ok := n.(engine.Node); ok {
			card.LiveMemory = engine.LiveMemoryUnavailable(en)
			if age, ok := ages[n.Name()]; ok {
				card.Heard = heardText(age, false)
			}
		} else if g, ok := n.(lastKnown); ok {
			card.CanDrain = false
			card.Heard = heardText(time.Since(g.LostAt), true)
		}
		if cpus, mem := n.Resources(); cpus > 0 || mem > 0 {
			card.Resources = nodeAllocation(allocs[n.Name()], cpus, mem)
		}
		devs := n.Devices()
		for i, smp := range n.Sample(now) {
			g := templates.GPUCard{
				Index:   smp.Index,
				UsedGB:  fmt.Sprintf("%.1f", float64(smp.MemUsedMiB)/1024),
				TotalGB: fmt.Sprintf("%.0f", float64(smp.MemMiB)/1024),
				UtilPct: int(smp.UtilPct),
				Fault:   faults[gpuName(n.Name(), smp.Index)],
			}
			if i < len(devs) {
				g.Model, g.UUID = devs[i].Model, devs[i].UUID
			}
			if smp.MemMiB > 0 {
				g.UsedPct = int(100 * smp.MemUsedMiB / smp.MemMiB)
			}
			held := m.figures.OnGPU(fmt.Sprintf("%s:%d", n.Name(), smp.Index))
			g.State = gpuState(held, state[n.Name()] != "ready" || g.Fault != "")
			var jobs []string
			for _, h := range held {
				if h.Share < 1 {
					jobs = append(jobs, fmt.Sprintf("job %d (%s GPU)", h.Job, fmtGPUs(h.Share)))
				} else {
					jobs = append(jobs, fmt.Sprintf("job %d", h.Job))
				}
			}
			g.Jobs = strings.Join(jobs, ", ")
			var mem []string
			for _, jm := range smp.Jobs {
				mem = append(mem, fmt.Sprintf("job %d: %.1f GB", jm.JobID, float64(jm.MemMiB)/1024))
			}
			g.Memory = strings.Join(mem, ", ")
			if l, ok := gl[telemetry.GPUKey{Node: n.Name(), Index: smp.Index}]; ok {
				g.Lanes = lanesText(l)
			}
			g.Idle = strings.Join(idleOn[fmt.Sprintf("%s:%d", n.Name(), smp.Index)], ", ")
			if r, ok := reserved[fmt.Sprintf("%s:%d", n.Name(), smp.Index)]; ok {
				g.Reserved = fmt.Sprintf("reserved for job %d from %s", r.JobID, r.From.Format("15:04"))
				if !r.From.After(m.now) {
					g.Reserved = fmt.Sprintf("reserved for job %d, now", r.JobID)
				}
			}
			card.GPUs = append(card.GPUs, g)
		}
		out.Nodes = append(out.Nodes, card)
	}
	return out, nil
}

// shownNode is what the cluster page shows of a machine: a connected one
// (engine.Node), or the last known state of one that disconnected.
type shownNode interface {
	Name() string
	Devices() []gpu.Device
	Resources() (cpus int, memMiB int64)
	Sample(now time.Time) []gpu.Sample
}

// lastKnown is a disconnected machine as last known (engine.GoneNode).
type lastKnown struct{ engine.GoneNode }

func (l lastKnown) Name() string                  { return l.Status.Name }
func (l lastKnown) Devices() []gpu.Device         { return l.Status.Devices }
func (l lastKnown) Resources() (int, int64)       { return l.Status.CPUs, l.Status.MemMiB }
func (l lastKnown) Sample(time.Time) []gpu.Sample { return l.Samples }

func (s *Server) clusterPage(c echo.Context) error {
	cl, err := s.cluster(c)
	if err != nil {
		return err
	}
	p := page(c, "Cluster", "cluster")
	p.Charts = true
	return s.render(c, http.StatusOK, templates.ClusterPage(p, cl))
}

func (s *Server) clusterLive(c echo.Context) error {
	cl, err := s.cluster(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.ClusterLive(page(c, "Cluster", "cluster"), cl))
}
