package web

import (
	"math"
	"strconv"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/telemetry"
)

// The conversions from the store's and the engine's values to the api
// types live in package app (app.Moment): a request or a published
// update reads one moment and converts everything it shows from it.

// pointOf converts a GPU reading.
func pointOf(p telemetry.Point) api.Point {
	out := api.Point{T: p.T, MemUsedMiB: p.MemUsedMiB, MemMiB: p.MemMiB, MemReservedMiB: p.MemReservedMiB, UtilPct: p.UtilPct,
		Jobs: make([]api.PointJob, len(p.Jobs)), Held: append([]int64{}, p.Held...), PowerW: p.PowerW, TempC: p.TempC}
	for i, j := range p.Jobs {
		out.Jobs[i] = api.PointJob{JobID: j.JobID, MemMiB: j.MemMiB}
	}
	return out
}

// pointsOf converts GPU readings; never nil.
func pointsOf(ps []telemetry.Point) []api.Point {
	out := make([]api.Point, len(ps))
	for i, p := range ps {
		out[i] = pointOf(p)
	}
	return out
}

// jobMemoryOf converts a job's memory readings; never nil.
func jobMemoryOf(ps []telemetry.JobPoint) []api.JobMemory {
	out := make([]api.JobMemory, len(ps))
	for i, p := range ps {
		out[i] = api.JobMemory{T: p.T, Node: p.GPU.Node, GPU: p.GPU.Index, MemMiB: p.MemMiB}
	}
	return out
}

// fmtGPUs writes a number of GPUs as a person reads it, to the hundredth
// (as static/history.js does): 3, 2.5, 0.33.
func fmtGPUs(n float64) string {
	r := math.Round(n*100) / 100
	if r == 0 {
		r = 0 // not -0
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}
