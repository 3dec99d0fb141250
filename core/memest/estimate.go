package memest

import (
	"errors"
	"fmt"
	"math"
)

// Source names where an estimate came from.
type Source string

// The sources of an estimate, from most to least trusted.
const (
	// Measured: corrected from peaks measured while the job ran.
	Measured Source = "measured"
	// Declared: both parts given by the user.
	Declared Source = "declared"
	// Catalogue: the built-in table of measured models.
	Catalogue Source = "catalogue"
	// Params: derived from the parameter count and batch size.
	Params Source = "params"
)

// Estimate is a job's GPU memory on one GPU, in MiB, before padding
// unless it came from Padding.Apply.
type Estimate struct {
	PersistentMiB int64
	EphemeralMiB  int64
	// Source names the least trusted source a part came from.
	Source Source
}

// TotalMiB is P + E.
func (e Estimate) TotalMiB() int64 { return e.PersistentMiB + e.EphemeralMiB }

// Request is what is known of a job's memory. Zero fields are unknown.
type Request struct {
	// PersistentMiB and EphemeralMiB are declared by the user. A part
	// that is declared wins over every other source.
	PersistentMiB int64
	EphemeralMiB  int64
	// TotalMiB is a declared total with no split (the portal's
	// gpu_mem_gb). It is split by the catalogue's P for the model when
	// known, else DefaultPersistentShare goes to P.
	TotalMiB int64
	// Model and Batch look the job up in the catalogue.
	Model string
	Batch int
	// Parameters is the model's parameter count, for the last resort.
	Parameters int64
}

// Rules of the parameter-count estimate (fp32 training).
const (
	// BytesPerParam is P per parameter with fp32 Adam: the weights (4),
	// their gradients (4) and Adam's two moments (8).
	BytesPerParam = 16
	// ActivationBytesPerParamSample is E per parameter and per sample of
	// the batch. The catalogue's CNNs at batch 50 need from 0.24 (AlexNet)
	// to 4.2 (GoogLeNet) bytes; 4.5 covers them all, so this rule errs on
	// the large side and the Tracker brings E down once iterations run.
	ActivationBytesPerParamSample = 4.5
	// DefaultPersistentShare is P's share of a declared total when the
	// model is not in the catalogue: the median P/(P+E) over the training
	// rows of shared/workloads/salus-memory.csv is 0.16, VGG at batch 25
	// is 0.24; 0.2 sits between.
	DefaultPersistentShare = 0.2
)

// ErrUnknown is returned when nothing is known of a job's memory.
var ErrUnknown = errors.New("no memory estimate: declare P and E (or a total), name a catalogue model and batch size, or give the parameter count and batch size")

// For estimates a job's memory from r: declared parts first, then the
// catalogue, then the parameter count. It fails with ErrUnknown when no
// source knows a part, and on negative inputs.
func For(r Request) (Estimate, error) {
	if r.PersistentMiB < 0 || r.EphemeralMiB < 0 || r.TotalMiB < 0 || r.Batch < 0 || r.Parameters < 0 {
		return Estimate{}, fmt.Errorf("memory request %+v: negative value", r)
	}
	if r.PersistentMiB > 0 && r.EphemeralMiB > 0 {
		return Estimate{r.PersistentMiB, r.EphemeralMiB, Declared}, nil
	}
	if r.TotalMiB > 0 && r.PersistentMiB == 0 && r.EphemeralMiB == 0 {
		return splitTotal(r), nil
	}
	guess, err := guess(r)
	if err != nil {
		return Estimate{}, err
	}
	// One declared part overrides its guessed counterpart.
	if r.PersistentMiB > 0 {
		guess.PersistentMiB = r.PersistentMiB
	}
	if r.EphemeralMiB > 0 {
		guess.EphemeralMiB = r.EphemeralMiB
	}
	return guess, nil
}

// guess asks the catalogue, then the parameter rule.
func guess(r Request) (Estimate, error) {
	if e, ok := Lookup(r.Model, r.Batch); ok {
		return e, nil
	}
	if r.Parameters > 0 && r.Batch > 0 {
		return FromParameters(r.Parameters, r.Batch), nil
	}
	if r.Model != "" {
		return Estimate{}, fmt.Errorf("model %q batch %d: %w", r.Model, r.Batch, ErrUnknown)
	}
	return Estimate{}, ErrUnknown
}

// splitTotal splits a declared total into P and E.
func splitTotal(r Request) Estimate {
	p := int64(math.Ceil(float64(r.TotalMiB) * DefaultPersistentShare))
	if e, ok := Lookup(r.Model, r.Batch); ok {
		p = min(e.PersistentMiB, r.TotalMiB)
	}
	return Estimate{p, r.TotalMiB - p, Declared}
}

// FromParameters estimates from a parameter count and a batch size with
// BytesPerParam and ActivationBytesPerParamSample.
func FromParameters(params int64, batch int) Estimate {
	p := float64(params) * BytesPerParam
	e := float64(params) * ActivationBytesPerParamSample * float64(batch)
	return Estimate{mibUp(p), mibUp(e), Params}
}

// mibUp converts bytes to MiB, rounding up.
func mibUp(bytes float64) int64 { return int64(math.Ceil(bytes / (1 << 20))) }
