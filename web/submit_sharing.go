package web

import (
	"errors"
	"fmt"
	"math"

	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/models"
)

// Limits on a sharing job's memory estimate.
const (
	maxBatchSize  = 1 << 20
	maxParameters = 10_000_000_000_000 // ten trillion
	// minGPUFraction is the smallest share of a GPU a job may ask for:
	// the engine gives it that share of a GPU's memory.
	minGPUFraction = 0.01
)

// shareRequest is what a valid request says about sharing.
type shareRequest struct {
	on       bool
	fraction float64
	est      memest.Estimate // zero when unknown
	batch    int
	params   int64
}

// memestModel reports whether memest's catalogue knows the model.
func memestModel(model string) bool {
	_, ok := memest.Lookup(model, 1)
	return ok
}

// sharing checks the sharing fields of r (docs/salus.md), noting what is
// wrong in fe. A job shares when it opts in (sharing) or asks for a
// fraction of a GPU (gpu_fraction, which implies sharing and one GPU).
// Only single-GPU jobs share. A sharing job needs a memory estimate:
// declared persistent and ephemeral memory (or a total, gpu_mem_gb), else
// a catalogue model with a batch size, else a parameter count with a
// batch size; a fraction of a GPU is an estimate by itself.
func (r SubmitRequest) sharing(fe fieldErrors, model string) shareRequest {
	out := shareRequest{fraction: r.GPUFraction, batch: r.BatchSize, params: r.Parameters}
	maxMiB := int64(maxGPUMemGB * 1024)
	f := r.GPUFraction
	switch {
	case math.IsNaN(f) || f < 0 || f >= 1 || (f > 0 && f < minGPUFraction):
		fe["gpu_fraction"] = fmt.Sprintf("must be from %v to less than 1: the share of one GPU the job needs", minGPUFraction)
	case f > 0 && r.GPUs != 1:
		fe["gpu_fraction"] = fmt.Sprintf("asks for a fraction of one GPU, but gpus is %d: leave gpus out or set it to 1", r.GPUs)
	}
	out.on = r.Sharing || f > 0
	if r.Sharing && r.GPUs != 1 {
		fe["sharing"] = fmt.Sprintf("needs exactly 1 GPU (gpus is %d): only single-GPU jobs share a GPU", r.GPUs)
	}
	for field, v := range map[string]int64{"mem_persistent_mib": r.MemPersistentMiB, "mem_ephemeral_mib": r.MemEphemeralMiB} {
		if v < 0 || v > maxMiB {
			fe[field] = fmt.Sprintf("must be between 0 and %d MiB", maxMiB)
		}
	}
	if r.BatchSize < 0 || r.BatchSize > maxBatchSize {
		fe["batch_size"] = fmt.Sprintf("must be between 0 and %d", maxBatchSize)
	}
	if r.Parameters < 0 || r.Parameters > maxParameters {
		fe["parameters"] = fmt.Sprintf("must be between 0 and %d", int64(maxParameters))
	}
	if !out.on {
		return out
	}
	if len(fe) > 0 {
		return out
	}
	est, err := memest.For(memest.Request{
		PersistentMiB: r.MemPersistentMiB, EphemeralMiB: r.MemEphemeralMiB,
		TotalMiB: int64(r.GPUMemGB * 1024), Model: model, Batch: r.BatchSize, Parameters: r.Parameters,
	})
	switch {
	case err == nil:
		out.est = est
		if padded := (memest.Padding{}).Apply(est); padded.TotalMiB() > maxMiB {
			fe["mem_ephemeral_mib"] = fmt.Sprintf("the estimate, P %d MiB and E %d MiB padded, exceeds %d MiB", est.PersistentMiB, est.EphemeralMiB, maxMiB)
		}
	case errors.Is(err, memest.ErrUnknown) && f > 0:
		// The fraction of the GPU it runs on is the estimate.
	case errors.Is(err, memest.ErrUnknown):
		fe["sharing"] = "needs a memory estimate: declare mem_persistent_mib and mem_ephemeral_mib (or gpu_mem_gb), " +
			"or a catalogue model with batch_size, or parameters with batch_size, or ask for a gpu_fraction"
	default:
		fe["sharing"] = "memory estimate: " + err.Error()
	}
	return out
}

// apply stores the sharing request on j.
func (sr shareRequest) apply(j *models.Job) {
	j.BatchSize, j.Parameters = sr.batch, sr.params
	if !sr.on {
		return
	}
	j.Sharing, j.GPUFraction = true, sr.fraction
	j.MemPersistentMiB, j.MemEphemeralMiB, j.MemSource = sr.est.PersistentMiB, sr.est.EphemeralMiB, string(sr.est.Source)
}
