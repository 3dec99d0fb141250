package integration

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuportal/gpuportal/models"
)

// TestHistoryInTheBrowser seeds an hour of GPU history into the server's
// database, then has an admin switch the cluster page's charts to longer
// ranges and open a GPU's live detail, and a team lead watch the team
// page follow a job over team:<name>.
func TestHistoryInTheBrowser(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	ctx := newTab(t)
	data := t.TempDir()
	srv := startServer(t, "--data", data, "--sim-gpus", "1x2x80")
	admin := newAPI(t, srv.URL, "admin", "dev")
	var nodes []struct {
		Name string
		GPUs []struct {
			Index int
			UUID  string
		}
	}
	if code := admin.do(http.MethodGet, "/api/v1/nodes", nil, &nodes); code != http.StatusOK || len(nodes) != 1 || len(nodes[0].GPUs) != 2 {
		t.Fatalf("nodes: %d %+v", code, nodes)
	}
	// An hour of history, as the server's writer would have left it.
	store, err := models.Open(context.Background(), "sqlite:"+filepath.Join(data, "gpuportal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := time.Now().Unix() / 60 * 60
	var rows []models.GPUHistory
	for m := int64(1); m <= 60; m++ {
		for _, g := range nodes[0].GPUs {
			rows = append(rows, models.GPUHistory{Step: models.StepMinute, Start: now - m*60, GPU: g.UUID, Node: nodes[0].Name,
				GPUIndex: g.Index, Samples: 60, MemMiB: 80 << 10, MemUsedAvgMiB: float64(m << 9), MemUsedMaxMiB: m << 10,
				UtilAvgPct: 50, BusySamples: 30})
		}
		if err := store.SaveClusterHistory(context.Background(), models.ClusterHistory{Start: now - m*60, Queued: int(m % 4), Running: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.SaveGPUHistory(context.Background(), rows); err != nil {
		t.Fatal(err)
	}

	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/cluster"),
		chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, "admin"),
		chromedp.SendKeys(`input[name=password]`, "dev"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#gpu-wall .gpu-chart canvas`),
	)
	if err != nil {
		t.Fatalf("cluster page: %v\n%s", err, srv.output())
	}
	err = chromedp.Do(ctx,
		chromedp.Click(`.ranges[data-chart="gpu-wall"] button[data-range="24h"]`),
		chromedp.WaitVisible(`#gpu-wall-history .gpu-chart[data-points] canvas`),
		chromedp.Click(`.ranges[data-chart="gpu-util"] button[data-range="1h"]`),
		chromedp.WaitVisible(`#gpu-util-history canvas`),
		chromedp.WaitVisible(`#jobs-by-state canvas`),
	)
	if err != nil {
		t.Fatalf("longer ranges on the cluster page: %v\n%s", err, srv.output())
	}
	// The jobs chart's axis spans the hour chosen at most and ends now,
	// not at its last count (once a minute): on a new server it spanned
	// a minute under a utilization chart of several.
	span, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](
		`(document.getElementById("jobs-by-state").dataset.span || "").split(",").map(Number).concat([Date.now() / 1000])`))
	if err != nil || len(span) != 3 {
		t.Fatalf("jobs chart span: %v, %v", span, err)
	}
	if from, to, now := span[0], span[1], span[2]; to < now-5 || to > now+5 || to-from > 3600 || to-from < 60 {
		t.Errorf("jobs chart spans %v to %v at %v: want an axis ending now, at most an hour long", from, to, now)
	}
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("gpu-wall").hidden`))
	if err != nil || !hidden {
		t.Errorf("the live wall is still shown over its history (%v)", err)
	}
	points, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll("#gpu-wall-history .gpu-chart")).map(function (c) { return c.dataset.points; })`))
	if err != nil {
		t.Fatal(err)
	}
	// 24 hours at five minutes: the seeded hour is 12 or 13 points per GPU.
	if len(points) != 2 || (points[0] != "12" && points[0] != "13") {
		t.Errorf("history wall points per GPU = %v, want 12 or 13 for each of 2 GPUs", points)
	}
	screenshot(t, ctx, "cluster-24h")

	// A GPU's detail: live over gpu:<uuid>, its newest second advancing.
	err = chromedp.Do(ctx,
		clickSwapped(`[data-gpu-detail]`),
		chromedp.WaitVisible(`#gpu-detail-chart[data-last] canvas`),
	)
	if err != nil {
		t.Fatalf("GPU detail: %v", err)
	}
	last := `Number(document.getElementById("gpu-detail-chart").dataset.last)`
	first, err := chromedp.Run(ctx, chromedp.Evaluate[float64](last))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the GPU detail to move", func() bool {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](last))
		return err == nil && v > first
	})
	screenshot(t, ctx, "gpu-detail")

	// The team page follows the team's queue live: a job submitted after
	// the page loaded appears without a reload.
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/jobs"),
		chromedp.Submit(`header form[action="/logout"] button`),
		chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, "lead"),
		chromedp.SendKeys(`input[name=password]`, "dev"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#jobs`),
		chromedp.Navigate(srv.URL+"/teams/vision"),
		chromedp.WaitVisible(`#team-now[data-updated]`),
	)
	if err != nil {
		t.Fatalf("team page: %v", err)
	}
	lead := newAPI(t, srv.URL, "lead", "dev")
	id := submit(t, lead, map[string]any{"name": "live-team-job", "team": "vision", "gpus": 1, "sim": map[string]any{"duration_s": 60}})
	eventually(t, 10*time.Second, "the team page to list the new job", func() bool {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#team-queue a[href="/jobs/`+strconv.FormatInt(id, 10)+`"]').length`))
		return err == nil && n == 1
	})
	// Its row has the page's columns: its priority under Priority.
	priority, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#team-queue a[href="/jobs/`+
		strconv.FormatInt(id, 10)+`"]').closest("tr").querySelector('td[data-label="Priority"]').textContent`))
	if err != nil || priority != "normal" {
		t.Errorf("the live row's Priority cell: %q, %v; want normal", priority, err)
	}
	screenshot(t, ctx, "team-live")
}
