package integration

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestScreensStayTrue watches pages in headless Chromium while their
// figures change, each figure shown twice on a page against its twin:
// a team page's card and its row of the shares table after the team's
// GPUs change (lead, at a phone's width); the cluster's "GPUs busy"
// chart, which counts each GPU once a second however often its readings
// come, against the cluster's GPUs; and a queued job's page, which says
// it has not run rather than drawing its GPUs' memory, until it starts.
func TestScreensStayTrue(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x80")
	alice := newAPI(t, srv.URL, "alice", "dev")
	ctx := newTabFor(t, 150*time.Second)
	login := func(user string) {
		t.Helper()
		err := chromedp.Do(ctx,
			chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
				_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
				return err
			}),
			chromedp.Navigate(srv.URL+"/login"), chromedp.WaitVisible(`input[name=username]`),
			chromedp.SendKeys(`input[name=username]`, user), chromedp.SendKeys(`input[name=password]`, "dev"),
			chromedp.Submit(`input[name=password]`), chromedp.WaitVisible(`header .who`))
		if err != nil {
			t.Fatalf("log in as %s: %v\n%s", user, err, srv.output())
		}
	}
	eval := func(what, js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}

	// The team page: the card follows the live stream; so must the table.
	login("lead")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(srv.URL+"/teams/vision"),
		chromedp.WaitVisible(`#team-now`)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the team card's first live update", func() bool {
		return eval("card", `document.getElementById("team-now").dataset.updated || ""`) != ""
	})
	const card = `document.querySelector('#team-now [data-field="in_use_gpus"]').textContent.trim()`
	const row = `document.querySelector('#shares tr[data-team="vision"] [data-field="in_use_gpus"]').textContent.trim()`
	if c, r := eval("card", card), eval("row", row); c != "0" || r != "0" {
		t.Fatalf("before any job: card %q, table %q; want 0 and 0", c, r)
	}
	var first struct{ ID int64 }
	if code := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "holds-two", "gpus": 2, "sim": map[string]any{"duration_s": 120}}, &first); code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	eventually(t, 20*time.Second, "the card to show the job's 2 GPUs", func() bool { return eval("card", card) == "2" })
	// The same frame updates both: the table follows within half a second.
	deadline := time.After(500 * time.Millisecond)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for r := eval("row", row); r != "2"; r = eval("row", row) {
		select {
		case <-deadline:
			t.Errorf("the card says 2 GPUs in use, the table under it %q", r)
		case <-poll.C:
			continue
		}
		break
	}

	// A job that waits behind the first: its page says it has not run.
	var second struct{ ID int64 }
	if code := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "waits", "gpus": 2, "sim": map[string]any{"duration_s": 5}}, &second); code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	login("alice")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1440, 900), chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, second.ID)),
		chromedp.WaitVisible(`#job-state`)); err != nil {
		t.Fatal(err)
	}
	if got := eval("memory", `String(document.getElementById("job-memory").hidden) + " " + (document.getElementById("job-memory-none") ? "said" : "unsaid")`); got != "true said" {
		t.Errorf("a queued job's memory chart: hidden and said %q; want the chart hidden and its absence said", got)
	}

	// The cluster's GPUs busy: never more than its 2 GPUs.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/cluster"), chromedp.WaitVisible(`#gpu-util`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(8 * time.Second) // a snapshot, then updates, some of the same second
	busy := eval("busy", `document.getElementById("gpu-util").dataset.maxBusy || ""`)
	if n, err := strconv.Atoi(busy); err != nil || n < 1 || n > 2 {
		t.Errorf("GPUs busy drawn at most %q at once on 2 GPUs, both busy; want 1 or 2", busy)
	}
}
