package web

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/templates"
)

// Salus lanes as the API and the pages show them (docs/salus.md): per
// GPU, the lanes its agent's gate holds, each lane's jobs with the
// persistent (P) and ephemeral (E) memory they hold, and who runs an
// iteration now.

// describeSharing says on the job page how a sharing job shares its GPU,
// its memory estimate, and while it runs, its lane and its neighbours.
func describeSharing(j api.Job, d *templates.JobDetail) {
	if !j.Sharing {
		return
	}
	d.Sharing = "opted in"
	if j.GPUFraction > 0 {
		d.Sharing = fmt.Sprintf("%g of a GPU", j.GPUFraction)
	}
	if e := j.MemoryEstimate; e != nil {
		d.Sharing += fmt.Sprintf("; memory estimate P %d MiB + E %d MiB (%s), padded at admission",
			e.PersistentMiB, e.EphemeralMiB, e.Source)
	}
	if j.State != job.Running {
		return
	}
	if j.HeldGPUs > 0 {
		d.Sharing += "; holds " + fmtGPUs(j.HeldGPUs) + " of a GPU now"
	}
	l := j.Lane
	if l == nil {
		d.Lane = "not in a lane: its agent serves no gate, or it waits to be admitted"
		return
	}
	d.Lane = fmt.Sprintf("lane %d of %s GPU %d (%d MiB)", l.Lane, l.Node, l.GPU, l.SizeMiB)
	switch {
	case len(l.LaneJobs) > 0:
		d.Lane += "; takes turns with " + jobIDs(l.LaneJobs)
	default:
		d.Lane += "; alone in its lane"
	}
	if len(l.GPUJobs) > 0 {
		d.Lane += "; beside " + jobIDs(l.GPUJobs) + " in other lanes"
	}
	if l.Running == j.ID {
		d.Lane += "; running an iteration now"
	}
	d.Lane += fmt.Sprintf("; holds P %d MiB + E %d MiB (%s, padded)", l.Held.PersistentMiB, l.Held.EphemeralMiB, l.Held.Source)
	if l.Iterations > 0 {
		d.Lane += fmt.Sprintf("; %d iterations", l.Iterations)
	}
	if l.MaxPeakMiB > 0 {
		d.Lane += fmt.Sprintf(", largest measured ephemeral peak %d MiB", l.MaxPeakMiB)
	}
}

// jobIDs names jobs: "jobs 3, 7".
func jobIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	if len(ids) == 1 {
		return "job " + parts[0]
	}
	return "jobs " + strings.Join(parts, ", ")
}

// lanesText describes a GPU's lanes in one line, for pages without
// charts: "persistent 2.3 GB · lane 1: 4.2 GB, jobs 3, 5 (job 3 runs) · ...".
func lanesText(g api.GPULanes) string {
	if len(g.Lanes) == 0 {
		return ""
	}
	parts := []string{fmt.Sprintf("persistent %.1f GB", float64(g.PersistentMiB)/1024)}
	for _, l := range g.Lanes {
		ids := make([]int64, len(l.Jobs))
		for i, j := range l.Jobs {
			ids[i] = j.JobID
		}
		p := fmt.Sprintf("lane %d: %.1f GB, %s", l.ID, float64(l.SizeMiB)/1024, jobIDs(ids))
		if l.Running != 0 {
			p += fmt.Sprintf(" (job %d runs)", l.Running)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " · ")
}

// publishLanes sends the gpus topic's subscribers every GPU's lanes, as
// a "lanes" message beside the samples' "update": the GPU wall draws them
// on the memory timelines.
func (s *Server) publishLanes() {
	subs := s.hub.subscribers(topicGPUs)
	if len(subs) == 0 {
		return
	}
	gl := s.app.GPULanes()
	out := make([]api.GPULanesUpdate, 0, len(gl))
	for k, l := range gl {
		out = append(out, api.GPULanesUpdate{Node: k.Node, Index: k.Index, Lanes: l})
	}
	slices.SortFunc(out, func(a, b api.GPULanesUpdate) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return a.Index - b.Index
	})
	s.broadcast(subs, wsOut{Topic: topicGPUs, Type: "lanes", Data: out})
}
