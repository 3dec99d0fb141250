package web

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// profileForm reads the submit form's profile fields.
func profileForm(c echo.Context, f *templates.SubmitForm) {
	f.CPUFamily, f.CPUCurve, f.MemCurve = c.FormValue("cpu_family"), c.FormValue("cpu_curve"), c.FormValue("mem_curve")
}

// profileRequest puts the form's profile fields into req, noting curves
// that are not x:speed pairs.
func profileRequest(f templates.SubmitForm, req *api.SubmitRequest, fe fieldErrors) {
	d := api.CPUProfileRequest{Family: strings.TrimSpace(f.CPUFamily)}
	for _, c := range []struct {
		field, v string
		into     *[][]float64
	}{
		{"cpu_profile.cpu_curve", f.CPUCurve, &d.CPUCurve},
		{"cpu_profile.mem_curve", f.MemCurve, &d.MemCurve},
	} {
		pts, err := api.ParseCurve(c.v)
		if err != nil {
			fe[c.field] = err.Error()
		}
		*c.into = pts
	}
	if d.Family != "" || len(d.CPUCurve) > 0 || len(d.MemCurve) > 0 {
		req.CPUProfile = &d
	}
}

// describeDeclaredProfile puts the profile the user declared for j in
// words for its page, such as "image-cnn" or "custom: CPU 1:0.4, 4:1;
// memory flat"; "" when none was.
func describeDeclaredProfile(j *models.Job) string {
	p, err := j.DeclaredProfile()
	if err != nil || p == nil {
		return ""
	}
	if p.Family != app.FamilyCustom {
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

// fillProfileForm puts a saved declaration into the submit form.
func fillProfileForm(f *templates.SubmitForm, d *api.CPUProfileRequest) {
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
