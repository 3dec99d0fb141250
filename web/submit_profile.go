package web

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// Limits on a declared sensitivity profile.
const (
	maxProfilePoints = 32
	maxCoresPerGPU   = 256  // x of a CPU curve
	maxMemGiBPerGPU  = 4096 // x of a memory curve
)

// FamilyCustom is the family of a declared profile with curves of its own.
const FamilyCustom = "custom"

// CPUProfileRequest is a job's CPU and host memory sensitivity as its user
// declares it (docs/synergy.md): a family of the catalogue, or curves, or
// a family with a curve that replaces the family's for that resource.
// Curves are [x, speed] points: x in cores per GPU (cpu_curve) or GiB of
// host memory per GPU (mem_curve), rising; speed in (0, 1], relative to
// the job's best, never falling. A resource without a curve (and no
// family) does not matter to the job.
type CPUProfileRequest struct {
	Family   string      `json:"family,omitempty"`
	CPUCurve [][]float64 `json:"cpu_curve,omitempty"`
	MemCurve [][]float64 `json:"mem_curve,omitempty"`
}

// declaredProfile checks r.CPUProfile, noting what is wrong in fe under
// cpu_profile.*, and returns the profile to store; nil when none was
// declared or it is not valid.
func (r SubmitRequest) declaredProfile(fe fieldErrors) *synergy.Profile {
	d := r.CPUProfile
	if d == nil {
		return nil
	}
	if d.Family == "" && len(d.CPUCurve) == 0 && len(d.MemCurve) == 0 {
		fe["cpu_profile"] = "give a family (" + strings.Join(synergy.Families(), ", ") + ") or cpu_curve / mem_curve"
		return nil
	}
	p := synergy.Profile{Family: FamilyCustom}
	if d.Family != "" {
		base, ok := synergy.CatalogueProfile(d.Family)
		if !ok {
			fe["cpu_profile.family"] = fmt.Sprintf("unknown family %q (known: %s)", d.Family, strings.Join(synergy.Families(), ", "))
			return nil
		}
		p = base
		p.CPU, p.Mem = slices.Clone(base.CPU), slices.Clone(base.Mem)
	}
	ok := true
	for _, c := range []struct {
		field string
		pts   [][]float64
		maxX  float64
		into  *synergy.Curve
	}{
		{"cpu_profile.cpu_curve", d.CPUCurve, maxCoresPerGPU, &p.CPU},
		{"cpu_profile.mem_curve", d.MemCurve, maxMemGiBPerGPU, &p.Mem},
	} {
		if len(c.pts) == 0 {
			continue
		}
		curve, msg := checkCurve(c.pts, c.maxX)
		if msg != "" {
			fe[c.field], ok = msg, false
			continue
		}
		*c.into, p.Family = curve, FamilyCustom
	}
	if !ok {
		return nil
	}
	return &p
}

// checkCurve reads declared [x, speed] points, or says what is wrong.
func checkCurve(pts [][]float64, maxX float64) (synergy.Curve, string) {
	if len(pts) > maxProfilePoints {
		return nil, fmt.Sprintf("has %d points, at most %d", len(pts), maxProfilePoints)
	}
	out := make(synergy.Curve, 0, len(pts))
	for i, pt := range pts {
		n := i + 1
		if len(pt) != 2 {
			return nil, fmt.Sprintf("point %d: want [x, speed], got %d numbers", n, len(pt))
		}
		x, y := pt[0], pt[1]
		switch {
		case math.IsNaN(x) || x < 0 || x > maxX:
			return nil, fmt.Sprintf("point %d: x %v must be between 0 and %v per GPU", n, x, maxX)
		case math.IsNaN(y) || y <= 0 || y > 1:
			return nil, fmt.Sprintf("point %d: speed %v must be more than 0 and at most 1", n, y)
		case i > 0 && x <= out[i-1].X:
			return nil, fmt.Sprintf("point %d: x %v must be above the previous point's %v", n, x, out[i-1].X)
		case i > 0 && y < out[i-1].Speed:
			return nil, fmt.Sprintf("point %d: speed %v falls from %v (a curve never falls)", n, y, out[i-1].Speed)
		}
		out = append(out, synergy.Point{X: x, Speed: y})
	}
	return out, ""
}

// ParseCurve reads a curve written as x:speed pairs separated by commas
// or semicolons, such as "1:0.4,2:0.7,4:1" (the submit form's curve
// fields and gpuportal job submit --cpu-curve); the empty text is no
// curve. Checking the values is left to the server.
func ParseCurve(s string) ([][]float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' })
	if len(parts) > maxProfilePoints {
		return nil, fmt.Errorf("has %d points, at most %d", len(parts), maxProfilePoints)
	}
	out := make([][]float64, 0, len(parts))
	for i, part := range parts {
		xs, ys, ok := strings.Cut(strings.TrimSpace(part), ":")
		x, errX := strconv.ParseFloat(strings.TrimSpace(xs), 64)
		y, errY := strconv.ParseFloat(strings.TrimSpace(ys), 64)
		if !ok || errX != nil || errY != nil {
			return nil, fmt.Errorf("point %d %q: want x:speed, such as 2:0.7", i+1, strings.TrimSpace(part))
		}
		out = append(out, []float64{x, y})
	}
	return out, nil
}

// profileForm reads the submit form's profile fields.
func profileForm(c echo.Context, f *templates.SubmitForm) {
	f.CPUFamily, f.CPUCurve, f.MemCurve = c.FormValue("cpu_family"), c.FormValue("cpu_curve"), c.FormValue("mem_curve")
}

// profileRequest puts the form's profile fields into req, noting curves
// that are not x:speed pairs.
func profileRequest(f templates.SubmitForm, req *SubmitRequest, fe fieldErrors) {
	d := CPUProfileRequest{Family: strings.TrimSpace(f.CPUFamily)}
	for _, c := range []struct {
		field, v string
		into     *[][]float64
	}{
		{"cpu_profile.cpu_curve", f.CPUCurve, &d.CPUCurve},
		{"cpu_profile.mem_curve", f.MemCurve, &d.MemCurve},
	} {
		pts, err := ParseCurve(c.v)
		if err != nil {
			fe[c.field] = err.Error()
		}
		*c.into = pts
	}
	if d.Family != "" || len(d.CPUCurve) > 0 || len(d.MemCurve) > 0 {
		req.CPUProfile = &d
	}
}

// declaredProfileJSON is the profile the user declared for j, for the
// job's JSON; nil when none was.
func declaredProfileJSON(j *models.Job) *api.CPUProfile {
	p, err := j.DeclaredProfile()
	if err != nil || p == nil {
		return nil
	}
	return &api.CPUProfile{Source: string(synergy.SourceDeclared), Family: p.Family, CPU: points(p.CPU), Mem: points(p.Mem)}
}

// describeDeclaredProfile puts the profile the user declared for j in
// words for its page, such as "image-cnn" or "custom: CPU 1:0.4, 4:1;
// memory flat"; "" when none was.
func describeDeclaredProfile(j *models.Job) string {
	p, err := j.DeclaredProfile()
	if err != nil || p == nil {
		return ""
	}
	if p.Family != FamilyCustom {
		return p.Family + " (catalogue)"
	}
	curve := func(c synergy.Curve) string {
		if len(c) == 0 {
			return "flat"
		}
		parts := make([]string, len(c))
		for i, pt := range c {
			parts[i] = strconv.FormatFloat(pt.X, 'g', 4, 64) + ":" + strconv.FormatFloat(pt.Speed, 'g', 3, 64)
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprintf("%s: CPU %s; memory %s", p.Family, curve(p.CPU), curve(p.Mem))
}

// profileRequestOf is the declaration that would give j's declared
// profile again (for a template made from j); nil when none was. A
// family's profile is declared by the family, a custom one by its curves.
func profileRequestOf(j *models.Job) *CPUProfileRequest {
	p, err := j.DeclaredProfile()
	if err != nil || p == nil {
		return nil
	}
	if p.Family != FamilyCustom {
		return &CPUProfileRequest{Family: p.Family}
	}
	pts := func(c synergy.Curve) [][]float64 {
		var out [][]float64
		for _, pt := range c {
			out = append(out, []float64{pt.X, pt.Speed})
		}
		return out
	}
	return &CPUProfileRequest{CPUCurve: pts(p.CPU), MemCurve: pts(p.Mem)}
}

// fillProfileForm puts a saved declaration into the submit form.
func fillProfileForm(f *templates.SubmitForm, d *CPUProfileRequest) {
	if d == nil {
		return
	}
	text := func(pts [][]float64) string {
		parts := make([]string, 0, len(pts))
		for _, pt := range pts {
			if len(pt) == 2 {
				parts = append(parts, strconv.FormatFloat(pt[0], 'f', -1, 64)+":"+strconv.FormatFloat(pt[1], 'f', -1, 64))
			}
		}
		return strings.Join(parts, ",")
	}
	f.CPUFamily, f.CPUCurve, f.MemCurve = d.Family, text(d.CPUCurve), text(d.MemCurve)
}
