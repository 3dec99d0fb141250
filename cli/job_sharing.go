package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/api"
)

// sharingLine says how a sharing job shares its GPU and with what memory
// estimate.
func sharingLine(j api.Job) string {
	s := "opted in"
	if j.GPUFraction > 0 {
		s = strconv.FormatFloat(j.GPUFraction, 'f', -1, 64) + " of a GPU"
	}
	if e := j.MemoryEstimate; e != nil {
		s += fmt.Sprintf(", estimate P %d MiB + E %d MiB (%s)", e.PersistentMiB, e.EphemeralMiB, e.Source)
	}
	return s
}

// laneLine says where a running sharing job runs and with whom.
func laneLine(l *api.JobLane) string {
	s := fmt.Sprintf("lane %d of %s GPU %d, %d MiB", l.Lane, l.Node, l.GPU, l.SizeMiB)
	if len(l.LaneJobs) > 0 {
		s += ", taking turns with " + jobList(l.LaneJobs)
	}
	if len(l.GPUJobs) > 0 {
		s += ", beside " + jobList(l.GPUJobs)
	}
	s += fmt.Sprintf("; holds P %d MiB + E %d MiB (%s)", l.Held.PersistentMiB, l.Held.EphemeralMiB, l.Held.Source)
	if l.MaxPeakMiB > 0 {
		s += fmt.Sprintf(", peak %d MiB over %d iterations", l.MaxPeakMiB, l.Iterations)
	}
	return s
}

func jobList(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = "job " + strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ", ")
}
