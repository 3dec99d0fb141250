package integration

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestTimeAxisLabelsEachTimeOnce: the charts' time axis labels a tick
// only where it falls on its labels' unit (a second up to 15 minutes
// shown, else a minute), so no two labels read the same. A chart of a
// job a few seconds old had ticks half a second apart and read
// 01:17:07 01:17:07 01:17:08 01:17:08.
func TestTimeAxisLabelsEachTimeOnce(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	browser := newTabFor(t, 2*time.Minute)
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80")
	startChromium(t, browser)
	sc := tabAs(t, browser, srv.URL, "alice", viewport{})
	ctx := sc.ctx
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/cluster"), chromedp.WaitVisible(`#gpu-util canvas`)); err != nil {
		t.Fatalf("cluster page: %v", err)
	}
	for _, tc := range []struct {
		name         string
		span, step   float64 // seconds
		labelledEach float64 // a tick labelled each this many seconds
	}{
		{"4 seconds, ticks each half second", 4, 0.5, 1},
		{"10 minutes, ticks each 30 s", 600, 30, 30},
		{"an hour, ticks each 30 s", 3600, 30, 60},
		{"a day, ticks each hour", 86400, 3600, 3600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A wide plot, so that no tick is left out for being near the
			// right edge: only the unit decides.
			labels, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`((span, step) => {
				const base = 1795910400; // a whole hour
				const u = {scales: {x: {min: base, max: base + span}}, bbox: {width: 100000 * devicePixelRatio}};
				const splits = [];
				for (let t = base; t < base + span; t += step) { splits.push(t); }
				return gpuportalLive.timeAxis().values(u, splits);
			})(`+ftoa(tc.span)+`, `+ftoa(tc.step)+`)`))
			if err != nil {
				t.Fatal(err)
			}
			var shown []string
			for i, l := range labels {
				at := float64(i) * tc.step
				onUnit := at/tc.labelledEach == float64(int(at/tc.labelledEach))
				if (l != "") != onUnit {
					t.Errorf("tick %d (+%vs) labelled %q; want a label: %v", i, at, l, onUnit)
				}
				if l != "" {
					shown = append(shown, l)
				}
			}
			if len(slices.Compact(slices.Clone(shown))) != len(shown) {
				t.Errorf("labels %q repeat", shown)
			}
		})
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
