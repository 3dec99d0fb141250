package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/templates"
)

// apiJobUsage answers GET /api/v1/jobs/{id}/usage: the job's use of its
// GPUs over its run, with the points.
func (s *Server) apiJobUsage(c echo.Context) error {
	j, err := s.loadJob(c)
	if err != nil {
		return err
	}
	u, err := s.app.JobUsage(c.Request().Context(), j, s.cfg.Now(), true)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}

// describeUsage fills in a job page's usage section and idle note from u.
func describeUsage(u api.JobUsage, now time.Time, d *templates.JobDetail) {
	d.Idle = u.Idle.Text(now, time.Local)
	d.Reclaim = u.Idle.ReclaimText(now, time.Local)
	if u.Idle != nil && u.Idle.KeepAliveUntil != nil {
		d.KeepAlive = "Kept alive until " + u.Idle.KeepAliveUntil.In(time.Local).Format("15:04") + ": not stopped for being idle before then."
	}
	if len(u.GPUs) == 0 {
		return
	}
	d.Usage = templates.JobUsage{Span: "over the run (" + fmtDuration(u.To.Sub(u.From)) + ")", UtilAvg: fmtPct(u.UtilAvgPct)}
	for _, g := range u.GPUs {
		row := templates.GPUUsage{Name: fmt.Sprintf("%s:%d", g.Node, g.Index), Util: fmtPct(g.UtilPct), UtilAvg: fmtPct(g.UtilAvgPct),
			MemPeak: fmtMiB(g.JobMemMaxMiB)}
		switch {
		case g.JobMemMiB != nil && g.Simulated:
			row.Mem = fmtMiB(g.JobMemMiB) + " (simulated) of " + fmtMiB(&g.MemMiB)
		case g.JobMemMiB != nil:
			row.Mem = fmtMiB(g.JobMemMiB) + " (its own) of " + fmtMiB(&g.MemMiB)
		case g.UtilPct != nil:
			row.Mem = fmtMiB(&g.MemUsedMiB) + " used on the GPU of " + fmtMiB(&g.MemMiB)
		default:
			row.Mem = "—"
		}
		if g.Shared {
			row.Shared = "Shared GPU (Salus): utilization is the whole GPU's; memory is this job's own where the agent reports it."
			if len(g.SharedWith) > 0 {
				ids := make([]string, len(g.SharedWith))
				for i, id := range g.SharedWith {
					ids[i] = strconv.FormatInt(id, 10)
				}
				row.Shared = "Shared with job " + strings.Join(ids, ", ") + ": utilization is the whole GPU's; memory is this job's own where the agent reports it."
			}
		}
		if g.Simulated {
			row.Simulated = "Simulated GPU: the simulator makes these readings up, whatever the job runs; they are not its own processes'."
		}
		row.UtilLine, row.MemLine = sparkLines(g, u.From.Unix(), u.To.Unix())
		d.Usage.GPUs = append(d.Usage.GPUs, row)
	}
}

// sparkLines are the SVG polyline points of g's utilization and memory
// (its own where known, else the GPU's) in a 300x60 box over [from, to].
func sparkLines(g api.GPUUsage, from, to int64) (util, mem string) {
	if to <= from || len(g.Points) == 0 {
		return "", ""
	}
	var u, m strings.Builder
	x := func(t int64) float64 { return 300 * float64(t-from) / float64(to-from) }
	top := float64(max(g.MemMiB, 1))
	for _, p := range g.Points {
		px := min(300, max(0, x(p.T+p.Step/2)))
		fmt.Fprintf(&u, "%.1f,%.1f ", px, 60-0.6*min(100, p.UtilPct))
		mm := float64(p.MemUsedMiB)
		if p.JobMemMiB != nil {
			mm = float64(*p.JobMemMiB)
		}
		fmt.Fprintf(&m, "%.1f,%.1f ", px, 60-60*min(1, mm/top))
	}
	return strings.TrimSpace(u.String()), strings.TrimSpace(m.String())
}

func fmtPct(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", *v)
}

func fmtMiB(v *int64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f GB", float64(*v)/1024)
}
