package trace

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// CurvePoint is one point of a sensitivity curve: at X (cores or GiB of
// host memory per GPU) the job runs at Speed, a fraction of its best.
type CurvePoint struct {
	X     float64
	Speed float64
}

// maxCurvePoints bounds a curve cell, against a runaway line.
const maxCurvePoints = 64

// ParseCurve reads a curve written as x:speed pairs separated by
// semicolons, such as "0:0;3:0.42;12:1": X finite and at least 0, in
// increasing order, Speed in [0, 1] and never decreasing. The empty text
// is the empty curve (the job does not notice the resource).
func ParseCurve(s string) ([]CurvePoint, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ";")
	if len(parts) > maxCurvePoints {
		return nil, fmt.Errorf("curve has %d points, at most %d", len(parts), maxCurvePoints)
	}
	out := make([]CurvePoint, 0, len(parts))
	for i, part := range parts {
		xs, ys, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("point %d %q: want x:speed", i+1, part)
		}
		x, errX := strconv.ParseFloat(strings.TrimSpace(xs), 64)
		y, errY := strconv.ParseFloat(strings.TrimSpace(ys), 64)
		switch {
		case errX != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0:
			return nil, fmt.Errorf("point %d: x %q is not a finite number, 0 or more", i+1, xs)
		case errY != nil || !(y >= 0 && y <= 1):
			return nil, fmt.Errorf("point %d: speed %q is not in [0, 1]", i+1, ys)
		case i > 0 && x <= out[i-1].X:
			return nil, fmt.Errorf("point %d: x %v does not increase", i+1, x)
		case i > 0 && y < out[i-1].Speed:
			return nil, fmt.Errorf("point %d: speed %v falls (curves never decrease)", i+1, y)
		}
		out = append(out, CurvePoint{X: x, Speed: y})
	}
	return out, nil
}

// FormatCurve writes a curve as ParseCurve reads it.
func FormatCurve(c []CurvePoint) string {
	parts := make([]string, len(c))
	for i, p := range c {
		parts[i] = formatSeconds(p.X) + ":" + formatSeconds(p.Speed)
	}
	return strings.Join(parts, ";")
}

// curveCell reads an optional curve column into its canonical text.
func curveCell(r row, col string) (string, error) {
	c, err := ParseCurve(r.str(col))
	if err != nil {
		return "", r.errorf(col, "%v", err)
	}
	return FormatCurve(c), nil
}
