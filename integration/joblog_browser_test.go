package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserJobLogKeepsItsPlace: a running job's output on its page
// opens at its end, as tail -f shows it; scrolled up, it stays where the
// reader put it across the page's refreshes (htmx replaces the job's
// facts every 2 s); scrolled back to the end, it follows the new lines.
// Before, it opened at the top and every refresh put it back there. At
// both widths.
func TestBrowserJobLogKeepsItsPlace(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	browser := newTabFor(t, 3*time.Minute)
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x80")
	startChromium(t, browser)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "chatty", "gpus": 1, "command": []string{"sh", "-c",
		`for i in $(seq 1 200); do echo "line $i"; done; while true; do echo tick; sleep 1; done`}})
	alice.waitState(id, 60*time.Second, "running")
	t.Cleanup(func() { alice.do("DELETE", fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil) })

	sc := tabAs(t, browser, srv.URL, "alice", viewport{})
	ctx := sc.ctx
	const atEnd = `(() => { const e = document.querySelector("#job-log"); return e.scrollHeight - e.clientHeight - e.scrollTop < 8; })()`
	// refreshed waits until the page's next refresh has replaced the
	// output seen now.
	refreshed := func(what string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__log = document.querySelector("#job-log"); true`)); err != nil {
			t.Fatal(err)
		}
		if err := waitFor(sc, what, `document.querySelector("#job-log") !== window.__log`, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.width, vp.height),
				chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, id)), chromedp.WaitVisible(`#job-log`))
			if err != nil {
				t.Fatalf("job page: %v", err)
			}
			if err := waitFor(sc, "the output's 200 lines", `document.querySelector("#job-log").innerText.includes("line 200")`, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			long, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.querySelector("#job-log"); return e.scrollHeight > 2 * e.clientHeight; })()`))
			if err != nil || !long {
				t.Fatalf("the output does not overflow its box (%v): nothing to scroll", err)
			}
			if err := waitFor(sc, "the output at its end", atEnd, 5*time.Second); err != nil {
				t.Error(err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#job-log").scrollTop = 100; true`)); err != nil {
				t.Fatal(err)
			}
			refreshed("a refresh after scrolling up")
			top, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector("#job-log").scrollTop`))
			if err != nil {
				t.Fatal(err)
			}
			if top < 98 || top > 102 {
				t.Errorf("scrolled to 100 px, the output is at %v px after a refresh", top)
			}
			screenshot(t, ctx, "job-log-scrolled-"+vp.name)
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.querySelector("#job-log"); e.scrollTop = e.scrollHeight; return true; })()`)); err != nil {
				t.Fatal(err)
			}
			refreshed("a refresh at the end")
			if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](atEnd)); err != nil || !ok {
				t.Errorf("scrolled to the end, the output left it after a refresh (%v)", err)
			}
			screenshot(t, ctx, "job-log-end-"+vp.name)
		})
	}
}
