package web

import (
	"fmt"
	"strings"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/templates"
)

// CPUs and host memory of running jobs (docs/synergy.md): what the
// scheduler allocated on each node against what the job uses there, and
// the sensitivity profile the allocation followed.

func cores(milli int64) string { return fmt.Sprintf("%.1f", float64(milli)/1000) }
func gib(mib int64) string     { return fmt.Sprintf("%.1f", float64(mib)/1024) }

// describeResources fills the job page's CPU and memory rows and its
// profile chart.
func describeResources(r *api.JobResources, d *templates.JobDetail) {
	if r == nil {
		return
	}
	for _, a := range r.Allocations {
		row := templates.ResourceRow{Node: a.Node,
			Allocated: fmt.Sprintf("%s cores, %s GiB", cores(a.CPUMilli), gib(a.MemMiB)),
			Share:     fmt.Sprintf("proportional %s cores, %s GiB", cores(a.PropCPUMilli), gib(a.PropMemMiB)),
			Used:      "not reported yet", Reason: a.Reason, Note: a.Note}
		if a.UsedCPUMilli != nil {
			row.Used = fmt.Sprintf("%s cores, %s GiB", cores(*a.UsedCPUMilli), gib(*a.UsedMemMiB))
		}
		if a.Enforced {
			row.Note = "enforced by cgroups"
		}
		d.Resources = append(d.Resources, row)
	}
	p := r.Profile
	d.Profile = fmt.Sprintf("%s, %s", p.Source, p.Family)
	if len(p.CPU) == 0 {
		d.Profile += ": insensitive to CPUs"
	}
	var alloc float64
	if len(r.Allocations) > 0 && r.Allocations[0].GPUs > 0 {
		alloc = float64(r.Allocations[0].CPUMilli) / 1000 / float64(r.Allocations[0].GPUs)
	}
	d.ProfileCurve = templates.ProfileCurve{CPU: p.CPU, AllocCoresPerGPU: alloc}
}

// nodeAllocation writes a node's allocated CPUs and memory for the
// cluster page.
func nodeAllocation(a engine.NodeAllocation, cpus int, memMiB int64) string {
	if a.Jobs == 0 {
		return fmt.Sprintf("CPUs 0 of %d allocated · memory 0 of %s GiB", cpus, gib(memMiB))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CPUs %s of %d allocated · memory %s of %s GiB", cores(a.CPUMilli), cpus, gib(a.MemMiB), gib(memMiB))
	fmt.Fprintf(&b, " · %d job", a.Jobs)
	if a.Jobs > 1 {
		b.WriteString("s")
	}
	return b.String()
}
