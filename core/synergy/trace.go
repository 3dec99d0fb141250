package synergy

import (
	"fmt"

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
func TraceProfile(j trace.Job, h *History) (Profile, Source, error) {
	var p Profile
	var src Source
	switch {
	case j.Model != "":
		p, src = Resolve(nil, h, j.Model, j.Batch)
	case j.CPUMilli > 0 || j.MemMiB > 0:
		p, src = catalogue[FamilyForRequest(j.GPUs, j.CPUMilli, j.MemMiB)], SourceCatalogue
	default:
		p, src = catalogue[FamilyInsensitive], SourceNone
	}
	if j.CPUCurve == "" && j.MemCurve == "" {
		return p, src, nil
	}
	for _, c := range []struct {
		text string
		into *Curve
	}{{j.CPUCurve, &p.CPU}, {j.MemCurve, &p.Mem}} {
		if c.text == "" {
			continue
		}
		pts, err := trace.ParseCurve(c.text)
		if err != nil {
			return Profile{}, "", fmt.Errorf("job %d: %w", j.ID, err)
		}
		cv := make(Curve, len(pts))
		for i, pt := range pts {
			cv[i] = Point{X: pt.X, Speed: pt.Speed}
		}
		*c.into = cv
	}
	p.Family = "declared"
	if err := p.Validate(); err != nil {
		return Profile{}, "", fmt.Errorf("job %d: %w", j.ID, err)
	}
	return p, SourceDeclared, nil
}
