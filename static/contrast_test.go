package static

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"testing"
)

// customProperty is a colour set in portal.css's :root, such as --ok: #17703d.
var customProperty = regexp.MustCompile(`(--[a-z-]+):\s*#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b`)

// cssColours reads the colours portal.css names.
func cssColours(t *testing.T) map[string]string {
	t.Helper()
	css, err := FS.ReadFile("portal.css")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range customProperty.FindAllStringSubmatch(string(css), -1) {
		hex := m[2]
		if len(hex) == 3 { // #fff is #ffffff
			hex = string([]byte{hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]})
		}
		out[m[1]] = "#" + hex
	}
	return out
}

// luminance is the relative luminance of an sRGB colour #rrggbb (WCAG 2.2).
func luminance(hex string) (float64, error) {
	if len(hex) != 7 || hex[0] != '#' {
		return 0, fmt.Errorf("colour %q: want #rrggbb", hex)
	}
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		v, err := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		if err != nil {
			return 0, fmt.Errorf("colour %q: %w", hex, err)
		}
		c := float64(v) / 255
		if c <= 0.04045 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l, nil
}

// contrast is the WCAG contrast ratio of two colours, from 1 to 21.
func contrast(a, b string) (float64, error) {
	la, err := luminance(a)
	if err != nil {
		return 0, err
	}
	lb, err := luminance(b)
	if err != nil {
		return 0, err
	}
	return (max(la, lb) + 0.05) / (min(la, lb) + 0.05), nil
}

func TestContrast(t *testing.T) {
	cases := []struct{ a, b string }{
		{"#000000", "#ffffff"}, {"#ffffff", "#ffffff"}, {"#777777", "#ffffff"},
	}
	want := []float64{21, 1, 4.48}
	for i, c := range cases {
		got, err := contrast(c.a, c.b)
		if err != nil || math.Abs(got-want[i]) > 0.01 {
			t.Errorf("contrast(%s, %s) = %.2f, %v; want %.2f", c.a, c.b, got, err, want[i])
		}
	}
}

// TestTextContrast holds every text colour of the portal to WCAG AA: 4.5:1
// against the background it is drawn on (3:1 for the borders of inputs,
// which are not text). The figures with the colours of this commit:
//
//	state badges on white: queued/cancelled (--muted) 6.39, running
//	(--run) 6.10, preempted/borrowed (--warn) 5.93, succeeded (--ok) 6.14,
//	failed (--bad) 6.55; muted text on the page 5.96; links 6.10; white
//	on buttons 6.10, on danger buttons 6.55; notices 5.53, errors 5.74;
//	the header's text 14.64 and its muted text 7.05; input borders 3.08.
//
// Before: succeeded #1e8a4c was 4.38 and preempted #b7791f 3.64.
func TestTextContrast(t *testing.T) {
	colours := cssColours(t)
	colours["white"] = "#ffffff"
	pairs := []struct {
		use    string
		fg, bg string
		min    float64
	}{
		{"queued and cancelled badges", "--muted", "--card", 4.5},
		{"running badge", "--run", "--card", 4.5},
		{"preempted and borrowed badges", "--warn", "--card", 4.5},
		{"succeeded badge and ready machines", "--ok", "--card", 4.5},
		{"failed badge", "--bad", "--card", 4.5},
		{"muted text on the page", "--muted", "--bg", 4.5},
		{"text on the page", "--fg", "--bg", 4.5},
		{"links", "--accent", "--card", 4.5},
		{"links on the page", "--accent", "--bg", 4.5},
		{"buttons", "white", "--accent", 4.5},
		{"danger buttons", "white", "--bad", 4.5},
		{"notices", "--ok", "--notice-bg", 4.5},
		{"errors", "--bad", "--flash-bg", 4.5},
		{"warnings (idle jobs, stranded jobs, guarantees)", "--warn", "--warning-bg", 4.5},
		{"links in warnings", "--accent", "--warning-bg", 4.5},
		{"the header's links", "--head-fg", "--head-bg", 4.5},
		{"who is logged in", "--head-muted", "--head-bg", 4.5},
		{"input borders", "--input-line", "--card", 3},
	}
	for _, p := range pairs {
		fg, bg := colours[p.fg], colours[p.bg]
		if fg == "" || bg == "" {
			t.Errorf("%s: portal.css sets no colour %s or %s", p.use, p.fg, p.bg)
			continue
		}
		r, err := contrast(fg, bg)
		if err != nil {
			t.Errorf("%s: %v", p.use, err)
			continue
		}
		if r < p.min {
			t.Errorf("%s: %s on %s has a contrast of %.2f:1, want at least %.1f:1", p.use, fg, bg, r, p.min)
		} else {
			t.Logf("%s: %s on %s: %.2f:1", p.use, fg, bg, r)
		}
	}
}
