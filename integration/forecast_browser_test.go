package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	apitypes "github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/forecast"
)

// TestForecastInBrowser looks at the forecasts as alice and an admin see
// them in a real browser, at 1440 and 390 px, on the demo: the jobs list's
// ETA column, the queues page with its calibration, and a waiting job's
// page. Screenshots go to $GPUPORTAL_SCREENSHOTS.
func TestForecastInBrowser(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--demo", "--data", t.TempDir())
	admin := newAPI(t, srv.URL, "admin", "dev")
	// Run times are known once 3 jobs have finished: a minute or two of
	// the demo's (20 s to 3 min each), seconds with three quick ones of
	// bob's ahead of them. And a job of team vision waits for as long as
	// the demo's stream takes to leave one waiting (up to a minute or
	// two), or at once when alice asks for all 8 GPUs while the demo's
	// notebook holds one.
	bob := newAPI(t, srv.URL, "bob", "dev")
	for i := range forecast.DefaultMinHistory {
		submit(t, bob, map[string]any{"name": fmt.Sprint("quick", i), "gpus": 1, "sim": map[string]any{"duration_s": 1}})
	}
	submit(t, newAPI(t, srv.URL, "alice", "dev"), map[string]any{"name": "whole-cluster", "gpus": 8, "sim": map[string]any{"duration_s": 60}})
	var waiting apitypes.Job
	eventually(t, 300*time.Second, "a job of team vision waiting with a forecast start", func() bool {
		var js []apitypes.Job
		admin.do(http.MethodGet, "/api/v1/jobs?scope=all&state=queued", nil, &js)
		for _, j := range js {
			if j.Team == "vision" && j.Forecast != nil && j.Forecast.State != apitypes.ForecastUnknown {
				waiting = j
				return true
			}
		}
		return false
	})
	for _, user := range []string{"alice", "admin"} {
		for _, width := range []int64{1440, 390} {
			t.Run(fmt.Sprintf("%s-%d", user, width), func(t *testing.T) {
				ctx := newTab(t)
				err := chromedp.Do(ctx,
					chromedp.EmulateViewport(width, 900),
					chromedp.Navigate(srv.URL+"/jobs"),
					chromedp.WaitVisible(`input[name=username]`),
					chromedp.SendKeys(`input[name=username]`, user),
					chromedp.SendKeys(`input[name=password]`, "dev"),
					chromedp.Submit(`input[name=password]`),
					// Cards (390 px) hide empty cells: a running job has no ETA.
					chromedp.WaitVisible(`#jobs td.eta:not(:empty)`),
				)
				if err != nil {
					t.Fatal(err)
				}
				screenshot(t, ctx, fmt.Sprintf("forecast-jobs-%s-%d", user, width))
				etas, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#jobs td.eta")].map(td => td.textContent.trim()).filter(s => s)`))
				if err != nil || len(etas) == 0 {
					t.Errorf("no ETA in the jobs list: %v, %v", etas, err)
				}
				if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/queues"), chromedp.WaitVisible(`#forecast-stats`)); err != nil {
					t.Fatal(err)
				}
				screenshot(t, ctx, fmt.Sprintf("forecast-queues-%s-%d", user, width))
				stats, err := textOf(ctx, `#forecast-stats`)
				if err != nil || !strings.Contains(stats, "Start forecasts") || !strings.Contains(stats, "percentile") {
					t.Errorf("queues page forecast card: %q, %v", stats, err)
				}
				if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, waiting.ID)), chromedp.WaitVisible(`#job-state`)); err != nil {
					t.Fatal(err)
				}
				screenshot(t, ctx, fmt.Sprintf("forecast-job-%s-%d", user, width))
			})
		}
	}
}
