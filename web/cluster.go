package web

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/templates"
)

func (s *Server) cluster(c echo.Context) (templates.Cluster, error) {
	out := templates.Cluster{Follower: !s.leading()}
	ctx := c.Request().Context()
	counts, err := s.app.JobCounts(ctx)
	if err != nil {
		return out, err
	}
	for _, st := range job.States {
		out.Counts = append(out.Counts, templates.Count{Label: string(st), N: counts[st]})
	}
	now := s.cfg.Now()
	u := currentUser(c)
	m, err := s.app.RunningMoment(ctx) // its GPUs' holders and idle jobs: the running jobs alone
	if err != nil {
		return out, err
	}
	idleJobs, idleSt, err := s.idleJobs(ctx, m, "")
	if err != nil {
		return out, err
	}
	out.Idle = idleRows(m, u, idleJobs, idleSt)
	idleOn := map[string][]string{} // "node:index" -> "job 3 idle 34m"
	for _, j := range idleJobs {
		for _, p := range j.Placement {
			idleOn[p] = append(idleOn[p], fmt.Sprintf("job %d %s", j.ID, idleSt[j.ID].Short(m.Now)))
		}
	}
	rs, reserved, err := s.app.ClusterReservations(ctx)
	if err != nil {
		return out, err
	}
	byJob := make(map[int64]string, len(rs))
	for _, r := range rs {
		text := reservedText(r, m.Now)
		byJob[r.JobID] = text
		out.Reserved = append(out.Reserved, templates.ReservedRow{JobID: r.JobID, GPUs: r.GPUs, Text: text,
			Backfill: backfillText(r.From, m.Now)})
	}
	cl := s.app.Cluster(now, true)
	gl := s.app.GPULanes()
	ages := s.heartbeatAges(time.Now())
	for _, n := range cl.Machines {
		card := templates.NodeCard{Name: n.Name, State: n.State, CanDrain: app.MayActOnNodes(u) && n.Connected, LiveMemory: n.LiveMemory}
		if !n.Connected {
			card.Heard = heardText(time.Since(n.LostAt), true)
		} else if age, ok := ages[n.Name]; ok {
			card.Heard = heardText(age, false)
		}
		if n.CPUs > 0 || n.MemMiB > 0 {
			card.Resources = nodeAllocation(n)
		}
		for i, smp := range n.Samples {
			g := templates.GPUCard{
				Index:   smp.Index,
				UsedGB:  fmt.Sprintf("%.1f", float64(smp.MemUsedMiB)/1024),
				TotalGB: fmt.Sprintf("%.0f", float64(smp.MemMiB)/1024),
				UtilPct: int(smp.UtilPct),
				Fault:   cl.Faults[app.GPUName(n.Name, smp.Index)],
			}
			if i < len(n.Devices) {
				g.Model, g.UUID = n.Devices[i].Model, n.Devices[i].UUID
			}
			if smp.MemMiB > 0 {
				g.UsedPct = int(100 * smp.MemUsedMiB / smp.MemMiB)
			}
			place := fmt.Sprintf("%s:%d", n.Name, smp.Index)
			held := m.Figures.OnGPU(place)
			g.State = gpuState(held, n.State != "ready" || g.Fault != "")
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
			if l, ok := gl[gpu.Ref{Node: n.Name, Index: smp.Index}]; ok {
				g.Lanes = lanesText(l)
			}
			g.Idle = strings.Join(idleOn[place], ", ")
			if r, ok := reserved[place]; ok {
				g.Reserved = byJob[r.JobID]
			}
			card.GPUs = append(card.GPUs, g)
		}
		out.Nodes = append(out.Nodes, card)
	}
	return out, nil
}

// reservedText says which job GPUs are reserved for and when it is
// expected to start, in its forecast's words, the ones its page and the
// API give: "reserved for job 12, expected to start 14:05–14:40".
func reservedText(r app.ReservationShown, now time.Time) string {
	text := fmt.Sprintf("reserved for job %d", r.JobID)
	if f := r.Forecast.Short(now, time.Local); f != "" && f != "?" {
		text += ", expected to start " + f
	}
	return text
}

// backfillText says which other jobs may start on reserved GPUs: those
// whose time limits end them by the reservation's estimate of when its
// GPUs free, or that may be preempted. It is the list's tooltip, not its
// text: that estimate, from the running jobs' limits and median run
// times, may lie well after the job's forecast start, which the text
// gives (audit3 saw a forecast of 05:04-05:06 beside "end by 05:39").
func backfillText(from, now time.Time) string {
	if !from.After(now) {
		return "no other job starts on them: the scheduler expects them free now"
	}
	return "another job starts on them only if its time limit ends it by " + api.Clock(from, now, time.Local) +
		" (the scheduler's estimate of when they free, from the running jobs' limits and run times), or if it may be preempted"
}

func (s *Server) clusterPage(c echo.Context) error {
	cl, err := s.cluster(c)
	if err != nil {
		return err
	}
	p := page(c, "Cluster", "cluster")
	p.Charts, p.StoredCharts = true, !s.leading()
	return s.render(c, http.StatusOK, templates.ClusterPage(p, cl))
}

func (s *Server) clusterLive(c echo.Context) error {
	cl, err := s.cluster(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.ClusterLive(page(c, "Cluster", "cluster"), cl))
}
