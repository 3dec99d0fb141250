package web

import (
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
)

// FuzzParseCurve: the form's and the CLI's curve text gives points or an
// error, never a panic, and the points then pass or fail the server's
// check with a reason.
func FuzzParseCurve(f *testing.F) {
	for _, s := range []string{"1:0.4,2:0.7,4:1", "0:0.8;32:1", "", "1:", ":1", "1:0.5,2:0.4", "NaN:1", "1e400:1", "1:0.5,,2:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pts, err := api.ParseCurve(s)
		if err != nil {
			return
		}
		c, why := app.CheckCurve(pts, 256)
		if why == "" && len(c) != len(pts) {
			t.Fatalf("%q: %d points checked into %d", s, len(pts), len(c))
		}
	})
}
