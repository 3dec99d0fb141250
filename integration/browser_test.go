package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the browser the tests drive, or skips (fails in CI).
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium: browser tests need it in CI (apt-get install -y chromium)")
	}
	t.Skip("no Chromium installed (apt-get install -y chromium)")
	return ""
}

// newTab starts a headless Chromium and returns a context for its first
// tab, which ends after 90 seconds.
func newTab(t *testing.T) context.Context {
	t.Helper()
	return newTabFor(t, 90*time.Second)
}

// newTabFor is newTab for a test that needs the browser for d.
func newTabFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, d)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	return ctx
}

// startChromium starts the browser behind newTabFor's tab, failing t
// when Chromium does not start.
func startChromium(t *testing.T, browser context.Context) {
	t.Helper()
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
}

// tabAs opens a tab of browser with cookies of its own, sized to vp (the
// window's size for a zero vp), logged in to base as user: a
// screenChecker over it. The tab closes when t ends.
func tabAs(t *testing.T, browser context.Context, base, user string, vp viewport) *screenChecker {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	sc := newScreenChecker(t, ctx, base)
	if vp.width > 0 {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.width, vp.height)); err != nil {
			t.Fatalf("size the tab to %s: %v", vp.name, err)
		}
	}
	if err := sc.login(user); err != nil {
		t.Fatal(err)
	}
	return sc
}

// textOf is the text of the first element sel matches, found and read
// in one evaluation: parts of pages that htmx swaps in every 2 s may be
// replaced between chromedp.Text's finding a node and reading it ("No
// node with given id found", in CI).
func textOf(ctx context.Context, sel string) (string, error) {
	return readFirst(ctx, sel, `e.innerText`)
}

// attrOf is the value of the attribute name of the first element sel
// matches, found and read in one evaluation, as textOf reads text.
func attrOf(ctx context.Context, sel, name string) (string, error) {
	a, err := json.Marshal(name)
	if err != nil {
		return "", err
	}
	return readFirst(ctx, sel, `e.getAttribute(`+string(a)+`) || ""`)
}

// readFirst evaluates expr, a JavaScript expression of e, on the first
// element sel matches, in one evaluation; an error where none does.
func readFirst(ctx context.Context, sel, expr string) (string, error) {
	q, err := json.Marshal(sel)
	if err != nil {
		return "", err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[string](`(function (s) { var e = document.querySelector(s); `+
		`if (!e) { throw new Error("no element " + s); } return `+expr+`; })(`+string(q)+`)`))
}

// clickSwapped clicks the first element sel matches in a part of the
// page htmx swaps in every few seconds. chromedp.Click finds the node,
// scrolls to it and then clicks; a swap between those steps replaces the
// node ("Could not find node with given id", in CI). A person clicks
// whatever is under the pointer, so the click is tried again on the new
// node, a few times at most; any other error ends it.
func clickSwapped(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		const tries = 5
		var err error
		for range tries {
			_, err = chromedp.Click(sel)(ctx, tg)
			if err == nil || !nodeSwapped(err) {
				return err
			}
		}
		return fmt.Errorf("click %s: swapped away %d times: %w", sel, tries, err)
	})
}

// nodeSwapped reports whether err is Chromium's answer about a node the
// page no longer has.
func nodeSwapped(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Could not find node with given id") || strings.Contains(s, "No node with given id")
}

// screenshot saves the page to $GPUPORTAL_SCREENSHOTS/name.png when that
// variable names a folder, for people to look at.
func screenshot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("GPUPORTAL_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
	}
}

// TestBrowserJourney drives a real browser through the newcomer's path: log
// in, submit a job with the form, watch the page update itself until the
// job succeeds with its JCT, then look at the live GPU wall.
func TestBrowserJourney(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	ctx := newTab(t)
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x80")

	err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/jobs"),
		chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, "alice"),
		chromedp.SendKeys(`input[name=password]`, "dev"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#jobs`),
		chromedp.Navigate(srv.URL+"/jobs/new"),
		chromedp.WaitVisible(`input[name=name]`),
		chromedp.SendKeys(`input[name=name]`, "browser-job"),
		chromedp.SetValue(`input[name=duration_s]`, "3"),
		chromedp.Submit(`input[name=name]`),
		chromedp.WaitVisible(`#job-state`),
	)
	if err != nil {
		t.Fatalf("log in and submit: %v\n%s", err, srv.output())
	}
	// The job's memory chart draws from the live stream.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#job-memory canvas`)); err != nil {
		t.Fatalf("job memory chart: %v", err)
	}
	screenshot(t, ctx, "job-running")
	// htmx refreshes the job's facts every 2s until it ends.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#job-state .state-succeeded`)); err != nil {
		t.Fatalf("wait for success: %v", err)
	}
	state, err := textOf(ctx, `#job-state`)
	if err != nil {
		t.Fatal(err)
	}
	jct, err := textOf(ctx, `#job-jct`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(state) != "succeeded" || !strings.HasSuffix(strings.TrimSpace(jct), "s") {
		t.Errorf("job page shows state %q, JCT %q", state, jct)
	}
	screenshot(t, ctx, "job-succeeded")

	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/cluster"),
		chromedp.WaitVisible(`#gpu-wall .gpu-chart canvas`),
		chromedp.WaitVisible(`#gpu-util canvas`),
	)
	if err != nil {
		t.Fatalf("cluster page: %v", err)
	}
	charts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#gpu-wall .gpu-chart").length`))
	if err != nil {
		t.Fatal(err)
	}
	if charts != 2 {
		t.Errorf("GPU wall has %d charts, want one per GPU (2)", charts)
	}
	screenshot(t, ctx, "cluster")
	for _, page := range []string{"queues", "jobs/new"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"+page), chromedp.WaitVisible(`main h1`)); err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		screenshot(t, ctx, strings.ReplaceAll(page, "/", "-"))
	}

	// An admin watches the GPU wall move: the newest sample drawn advances.
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/jobs"),
		chromedp.Submit(`header form[action="/logout"] button`),
		chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, "admin"),
		chromedp.SendKeys(`input[name=password]`, "dev"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#jobs`),
		chromedp.Navigate(srv.URL+"/cluster"),
		chromedp.WaitVisible(`#gpu-wall .gpu-chart[data-last]`),
	)
	if err != nil {
		t.Fatalf("admin on the cluster page: %v", err)
	}
	lastSample := `Number(document.querySelector("#gpu-wall .gpu-chart").dataset.last)`
	first, err := chromedp.Run(ctx, chromedp.Evaluate[float64](lastSample))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the GPU wall to move", func() bool {
		now, err := chromedp.Run(ctx, chromedp.Evaluate[float64](lastSample))
		if err != nil {
			t.Fatal(err)
		}
		return now > first
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/admin"), chromedp.WaitVisible(`#users`)); err != nil {
		t.Fatalf("admin page: %v", err)
	}
	screenshot(t, ctx, "admin")
}
