package sim

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Plot geometry, in SVG user units.
const (
	plotW, plotH         = 960, 560
	marginL, marginR     = 80, 230
	marginT, marginB     = 50, 70
	plotPointsPerSeries  = 400
	legendRow            = 22
	plotFont             = "font-family=\"sans-serif\" font-size=\"13\""
	plotAxisColor        = "#333"
	plotGridColor        = "#ddd"
	plotSmallestJCTShown = 1.0 // seconds; shorter JCTs are drawn at 1 s
)

// plotColors is the Okabe-Ito palette, readable by colour-blind people,
// without its yellow (too pale on white).
var plotColors = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"}

// plotDashes tell apart lines that lie on top of one another.
var plotDashes = []string{"", "8 4", "2 3", "10 3 2 3"}

// timeTicks are the x-axis ticks: round durations, labelled for people.
var timeTicks = []struct {
	s     float64
	label string
}{
	{1, "1 s"}, {10, "10 s"}, {60, "1 min"}, {600, "10 min"}, {3600, "1 h"},
	{21600, "6 h"}, {86400, "1 d"}, {604800, "1 w"}, {2592000, "30 d"},
	{31536000, "1 y"}, {315360000, "10 y"},
}

// WriteCDF draws the cumulative distribution of JCT of every result in
// one SVG picture: x is the JCT on a log scale, y the fraction of finished
// jobs with at most that JCT, one line per policy, with a legend.
func WriteCDF(w io.Writer, results []*Result, title string) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range results {
		if len(r.JCTs) > 0 {
			lo = min(lo, max(r.JCTs[0], plotSmallestJCTShown))
			hi = max(hi, max(r.JCTs[len(r.JCTs)-1], plotSmallestJCTShown))
		}
	}
	if math.IsInf(lo, 1) {
		return fmt.Errorf("plot: no finished jobs to draw")
	}
	x0, x1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if x1 <= x0 {
		x1 = x0 + 1
	}
	innerW, innerH := float64(plotW-marginL-marginR), float64(plotH-marginT-marginB)
	px := func(s float64) float64 {
		return marginL + (math.Log10(max(s, plotSmallestJCTShown))-x0)/(x1-x0)*innerW
	}
	py := func(f float64) float64 { return marginT + (1-f)*innerH }

	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>`+"\n",
		plotW, plotH, plotW, plotH, plotFont)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="28" font-size="16" font-weight="bold">%s</text>`+"\n", marginL, html.EscapeString(title))

	// Grid and ticks.
	for _, t := range timeTicks {
		lt := math.Log10(t.s)
		if lt < x0-1e-9 || lt > x1+1e-9 {
			continue
		}
		x := px(t.s)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x, marginT, x, py(0), plotGridColor)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, py(0)+18, t.label)
	}
	for i := 0; i <= 10; i += 2 {
		f := float64(i) / 10
		y := py(f)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", marginL, y, px(math.Pow(10, x1)), y, plotGridColor)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%.1f</text>`+"\n", marginL-8, y+4, f)
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="%s"/>`+"\n", marginL, marginT, innerW, innerH, plotAxisColor)
	fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">job completion time (JCT, log scale)</text>`+"\n", marginL+innerW/2, plotH-20)
	fmt.Fprintf(b, `<text transform="translate(22 %.1f) rotate(-90)" text-anchor="middle">fraction of jobs with JCT ≤ x</text>`+"\n", marginT+innerH/2)

	// One line per policy, and its legend entry.
	for i, r := range results {
		color := plotColors[i%len(plotColors)]
		dash := ""
		if d := plotDashes[i%len(plotDashes)]; d != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, d)
		}
		if len(r.JCTs) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, cdfPoints(r.JCTs, px, py))
		}
		ly := float64(marginT + 10 + i*legendRow)
		lx := float64(plotW - marginR + 20)
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="3"%s/>`+"\n", lx, ly, lx+24, ly, color, dash)
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f">%s (avg %s)</text>`+"\n", lx+32, ly+4, html.EscapeString(r.Policy), humanSeconds(r.AvgJCT))
	}
	fmt.Fprintln(b, "</svg>")
	if err := b.Flush(); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// cdfPoints draws an empirical CDF as a staircase through at most
// plotPointsPerSeries quantiles of sorted.
func cdfPoints(sorted []float64, px func(float64) float64, py func(float64) float64) string {
	n := len(sorted)
	steps := min(n, plotPointsPerSeries)
	var sb strings.Builder
	prevF := 0.0
	fmt.Fprintf(&sb, "%.1f,%.1f", px(sorted[0]), py(0))
	for k := 1; k <= steps; k++ {
		i := (k*n+steps-1)/steps - 1 // last index of the k-th quantile step
		f := float64(i+1) / float64(n)
		x := px(sorted[i])
		fmt.Fprintf(&sb, " %.1f,%.1f %.1f,%.1f", x, py(prevF), x, py(f))
		prevF = f
	}
	return sb.String()
}

// humanSeconds writes a duration in the largest unit that keeps it >= 1.
func humanSeconds(s float64) string {
	switch {
	case s >= 86400:
		return fmt.Sprintf("%.1f d", s/86400)
	case s >= 3600:
		return fmt.Sprintf("%.1f h", s/3600)
	case s >= 60:
		return fmt.Sprintf("%.1f min", s/60)
	}
	return fmt.Sprintf("%.0f s", s)
}
