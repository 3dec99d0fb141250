package web

import (
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/templates"
)

// sharingForm reads the submit form's sharing fields.
func sharingForm(c echo.Context, f *templates.SubmitForm) {
	f.Sharing = c.FormValue("sharing") != ""
	f.GPUFraction, f.BatchSize, f.Parameters = c.FormValue("gpu_fraction"), c.FormValue("batch_size"), c.FormValue("parameters")
	f.MemPersistentMiB, f.MemEphemeralMiB = c.FormValue("mem_persistent_mib"), c.FormValue("mem_ephemeral_mib")
}

// sharingRequest puts the form's sharing fields into req, noting fields
// that are not numbers.
func sharingRequest(f templates.SubmitForm, req *api.SubmitRequest, fe fieldErrors) {
	req.Sharing = f.Sharing
	if v := strings.TrimSpace(f.GPUFraction); v != "" {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			fe["gpu_fraction"] = "must be a number, such as 0.5"
		}
		req.GPUFraction = x
	}
	for _, w := range []struct {
		field, v string
		into     *int64
	}{
		{"mem_persistent_mib", f.MemPersistentMiB, &req.MemPersistentMiB},
		{"mem_ephemeral_mib", f.MemEphemeralMiB, &req.MemEphemeralMiB},
		{"parameters", f.Parameters, &req.Parameters},
	} {
		if v := strings.TrimSpace(w.v); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				fe[w.field] = "must be a whole number"
			}
			*w.into = n
		}
	}
	if v := strings.TrimSpace(f.BatchSize); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			fe["batch_size"] = "must be a whole number"
		}
		req.BatchSize = n
	}
}

// fillSharingForm puts a submission's sharing fields into the submit form.
func fillSharingForm(f *templates.SubmitForm, r api.SubmitRequest) {
	f.Sharing = r.Sharing
	num := func(n int64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatInt(n, 10)
	}
	if r.GPUFraction > 0 {
		f.GPUFraction = strconv.FormatFloat(r.GPUFraction, 'f', -1, 64)
	}
	f.MemPersistentMiB, f.MemEphemeralMiB = num(r.MemPersistentMiB), num(r.MemEphemeralMiB)
	f.BatchSize, f.Parameters = num(int64(r.BatchSize)), num(r.Parameters)
}
