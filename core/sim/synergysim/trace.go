package synergysim

import (
	"fmt"

	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TraceProfile resolves the profile of a trace job, in this order:
//
//   - its model (and batch) through h and the catalogue (Resolve);
//   - without a model, the family FamilyForRequest guesses from its CPU
//     and memory request (openb pods);
//   - else the flat profile (SourceNone).
//
// Curves the trace declares (native cpu_curve, mem_curve) then replace
// the resolved ones, and the profile counts as declared.
func TraceProfile(j trace.Job, h *synergy.History) (synergy.Profile, synergy.Source, error) {
	var p synergy.Profile
	var src synergy.Source
	switch {
	case j.Model != "":
		p, src = synergy.Resolve(nil, h, j.Model, j.Batch)
	case j.CPUMilli > 0 || j.MemMiB > 0:
		p, src = catalogued(synergy.FamilyForRequest(j.GPUs, j.CPUMilli, j.MemMiB)), synergy.SourceCatalogue
	default:
		p, src = catalogued(synergy.FamilyInsensitive), synergy.SourceNone
	}
	if j.CPUCurve == "" && j.MemCurve == "" {
		return p, src, nil
	}
	for _, c := range []struct {
		text string
		into *synergy.Curve
	}{{j.CPUCurve, &p.CPU}, {j.MemCurve, &p.Mem}} {
		if c.text == "" {
			continue
		}
		pts, err := trace.ParseCurve(c.text)
		if err != nil {
			return synergy.Profile{}, "", fmt.Errorf("job %d: %w", j.ID, err)
		}
		cv := make(synergy.Curve, len(pts))
		for i, pt := range pts {
			cv[i] = synergy.Point{X: pt.X, Speed: pt.Speed}
		}
		*c.into = cv
	}
	p.Family = "declared"
	if err := p.Validate(); err != nil {
		return synergy.Profile{}, "", fmt.Errorf("job %d: %w", j.ID, err)
	}
	return p, synergy.SourceDeclared, nil
}

// catalogued is the catalogue's profile of family, one of the families
// synergy.FamilyForRequest names or synergy.FamilyInsensitive, all of
// which the catalogue holds.
func catalogued(family string) synergy.Profile {
	p, _ := synergy.CatalogueProfile(family)
	return p
}
