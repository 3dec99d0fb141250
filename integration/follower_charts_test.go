package integration

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestFollowerChartsInTheBrowser: the cluster page of a follower replica
// (no machine reports to it) drew an empty Utilization chart and no GPU
// wall. With the history the leader's writer leaves in the shared
// PostgreSQL database, it now draws both from the stored minutes, hides
// the empty live charts and says why, at a desktop's width and a phone's.
func TestFollowerChartsInTheBrowser(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	dsn := modelstest.PostgresDSN(t)
	key := sessionKeyFile(t)
	replica := func() *server {
		return startAgentServer(t, "--data", t.TempDir(), "--db", dsn, "--session-key-file", key)
	}
	leader := replica()
	eventually(t, 10*time.Second, "the first replica to lead", func() bool { return role(leader.URL) == "leader" })
	follower := replica()
	eventually(t, 10*time.Second, "the second replica to follow", func() bool { return role(follower.URL) == "follower" })

	store, err := models.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// From half an hour back to 5 minutes ahead, so that the last 10
	// minutes hold a row a minute whenever the pages read them (a test
	// that crossed a minute found 9).
	now := time.Now().Unix() / 60 * 60
	var rows []models.GPUHistory
	for m := int64(-5); m <= 30; m++ {
		for idx, uuid := range []string{"GPU-f0", "GPU-f1"} {
			rows = append(rows, models.GPUHistory{Step: models.StepMinute, Start: now - m*60, GPU: uuid, Node: "box-0",
				GPUIndex: idx, Samples: 60, MemMiB: 80 << 10, MemUsedAvgMiB: float64((m%7 + 1) << 12), MemUsedMaxMiB: (m%7 + 2) << 12,
				UtilAvgPct: 60, BusySamples: 60})
		}
	}
	if err := store.SaveGPUHistory(context.Background(), rows); err != nil {
		t.Fatal(err)
	}

	// Every role sees the cluster's charts: an admin, a team lead, a
	// researcher.
	for _, user := range []string{"admin", "lead", "alice"} {
		ctx := newTab(t)
		err = chromedp.Do(ctx,
			chromedp.Navigate(follower.URL+"/cluster"),
			chromedp.WaitVisible(`input[name=username]`),
			chromedp.SendKeys(`input[name=username]`, user),
			chromedp.SendKeys(`input[name=password]`, "dev"),
			chromedp.Submit(`input[name=password]`),
			chromedp.WaitVisible(`#stored-charts`),
		)
		if err != nil {
			t.Fatalf("%s: the follower's cluster page: %v\n%s", user, err, follower.output())
		}
		followerCharts(t, ctx, follower, user)
	}
}

// followerCharts checks the follower's cluster page's charts, as drawn
// for user, at each viewport.
func followerCharts(t *testing.T, ctx context.Context, follower *server, user string) {
	t.Helper()
	for _, vp := range viewports {
		err := chromedp.Do(ctx,
			chromedp.EmulateViewport(vp.width, vp.height),
			chromedp.Navigate(follower.URL+"/cluster"),
			chromedp.WaitVisible(`#gpu-util-history canvas`),
			chromedp.WaitVisible(`#gpu-wall-history .gpu-chart[data-points] canvas`),
		)
		if err != nil {
			t.Fatalf("%s at %s: the follower's charts: %v\n%s", user, vp.name, err, follower.output())
		}
		live, err := chromedp.Run(ctx, chromedp.Evaluate[[]bool](
			`[document.getElementById("gpu-util").hidden, document.getElementById("gpu-wall").hidden]`))
		if err != nil || len(live) != 2 || !live[0] || !live[1] {
			t.Errorf("%s at %s: the empty live charts hidden: %v (%v), want both", user, vp.name, live, err)
		}
		// Ten minutes at a minute a point: 10 or 11 per GPU.
		points, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`Array.from(document.querySelectorAll("#gpu-wall-history .gpu-chart")).map(function (c) { return c.dataset.points; })`))
		if err != nil || len(points) != 2 || (points[0] != "10" && points[0] != "11") {
			t.Errorf("%s at %s: the wall's points per GPU %v (%v), want 10 or 11 for each of 2 GPUs", user, vp.name, points, err)
		}
		screenshot(t, ctx, "follower-cluster-"+user+"-"+vp.name)
	}
}
