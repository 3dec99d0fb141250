package integration

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestClusterChartsAgree opens the cluster page as admin on 128 GPUs
// while jobs start and end, at a desktop's width and a phone's, and
// checks that its "GPUs busy" chart, drawn from the gpus topic's first
// frame and then its updates (api.GPUsUpdate), draws the same GPUs busy
// each second as GET /api/v1/cluster/history says, and that the GPU wall
// has a chart for every GPU.
func TestClusterChartsAgree(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "16x8x80")
	admin := newAPI(t, srv.URL, "admin", "dev")
	alice := newAPI(t, srv.URL, "alice", "dev")
	for i := range 40 {
		body := map[string]any{"name": fmt.Sprintf("c%d", i), "gpus": 1 + i%4, "sim": map[string]any{"duration_s": 3 + i%9}}
		if code := alice.do(http.MethodPost, "/api/v1/jobs", body, nil); code != http.StatusCreated {
			t.Fatalf("submit: %d", code)
		}
	}
	ctx := newTabFor(t, 120*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/login"), chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, "admin"), chromedp.SendKeys(`input[name=password]`, "dev"),
		chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`header .who`)); err != nil {
		t.Fatalf("log in: %v\n%s", err, srv.output())
	}
	for _, width := range []int64{1440, 390} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(srv.URL+"/cluster"),
			chromedp.WaitVisible(`#gpu-util`)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "a chart for each of the 128 GPUs", func() bool {
			charts, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#gpu-wall .gpu-chart").length`))
			return charts == 128
		})
		// Some seconds of updates, jobs starting and ending meanwhile: the
		// chart's seconds against the history's, read again until at least
		// 8 seconds are in both (on a loaded machine a second may be
		// missing from either) and the busy count has moved.
		compared, moving, mismatch := 0, false, ""
		deadline := time.Now().Add(60 * time.Second)
		for {
			var drawn [][]float64
			var err error
			if drawn, err = chromedp.Run(ctx, chromedp.Evaluate[[][]float64](`(document.getElementById("gpu-util").drawn || []).slice(0, 2)`)); err != nil {
				t.Fatal(err)
			}
			var h struct {
				Points []struct {
					T        int64   `json:"t"`
					BusyGPUs float64 `json:"busy_gpus"`
				} `json:"points"`
			}
			if code := admin.do(http.MethodGet, "/api/v1/cluster/history?range=10m", nil, &h); code != http.StatusOK {
				t.Fatalf("history: %d", code)
			}
			busy := make(map[int64]float64)
			for _, p := range h.Points {
				busy[p.T] = p.BusyGPUs
			}
			compared, moving, mismatch = 0, false, ""
			if len(drawn) == 2 {
				ts, bs := drawn[0], drawn[1]
				for i := range len(ts) - 3 { // the newest seconds may still be coming in
					want, ok := busy[int64(ts[i])]
					if !ok {
						continue
					}
					compared++
					moving = moving || bs[i] != bs[0]
					if bs[i] != want && mismatch == "" {
						mismatch = fmt.Sprintf("second %d: the chart draws %v GPUs busy, the history says %v", int64(ts[i]), bs[i], want)
					}
				}
			}
			if mismatch != "" || compared >= 8 && moving || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second)
		}
		if mismatch != "" {
			t.Errorf("%d px, %s", width, mismatch)
		}
		if compared < 8 || !moving {
			t.Errorf("%d px: %d seconds compared, busy GPUs moving: %v; want at least 8 while jobs start and end", width, compared, moving)
		}
		// Only the charts in view are drawn each second: the last GPU's,
		// far down the wall, is drawn when it is scrolled into view.
		const last = `document.querySelector('#gpu-wall .gpu-chart[data-gpu="node-9/7"]')`
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](last+`.scrollIntoView() === undefined`)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the last GPU's chart drawn to its newest reading once in view", func() bool {
			same, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](last+`.dataset.drawn === `+last+`.dataset.last`))
			return same
		})
		screenshot(t, ctx, fmt.Sprintf("cluster-128gpus-admin-%d", width))
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.scrollTo(0, 0) === undefined`)); err != nil {
			t.Fatal(err)
		}
	}
}
