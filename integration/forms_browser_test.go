package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// answerConfirm makes the page's next confirmation questions answer yes
// or no, and remember the last question in window.__asked.
func answerConfirm(sc *screenChecker, yes bool) error {
	_, err := chromedp.Run(sc.ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`window.__asked = ""; window.confirm = (q) => { window.__asked = q; return %t; }; true`, yes)))
	return err
}

// asked is the last confirmation question the page asked.
func asked(sc *screenChecker) (string, error) {
	return chromedp.Run(sc.ctx, chromedp.Evaluate[string](`window.__asked || ""`))
}

// visible reports whether a person sees the element sel: it is rendered,
// and not inside a closed <details>.
func visible(sc *screenChecker, sel string) (bool, error) {
	return chromedp.Run(sc.ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { const e = document.querySelector(%q); return !!e && e.checkVisibility({visibilityProperty: true}); })()`, sel)))
}

// waitFor polls the page until the expression is true.
func waitFor(sc *screenChecker, what, expr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(sc.ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v (last error %v)", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestBrowserSubmitAndConfirm uses the submit form as a researcher on a
// phone: it shows the fields of the kind of job chosen and keeps the
// sharing and CPU internals under "Advanced"; then cancelling the job
// asks first, and a "no" leaves it running. An admin's cordon asks too.
func TestBrowserSubmitAndConfirm(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	browser := newTabFor(t, 3*time.Minute)
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "2x2x80")
	startChromium(t, browser)
	phone := viewports[1]
	sc := tabAs(t, browser, srv.URL, "alice", phone)
	ctx := sc.ctx
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/jobs/new"), chromedp.WaitVisible(`#submit-job`)); err != nil {
		t.Fatalf("submit page: %v", err)
	}
	shown := func(want map[string]bool) {
		t.Helper()
		for sel, w := range want {
			got, err := visible(sc, sel)
			if err != nil {
				t.Fatal(err)
			}
			if got != w {
				t.Errorf("%s shown: %v, want %v", sel, got, w)
			}
		}
	}
	// A simulated job at first: its duration, not a command; the
	// internals folded away.
	shown(map[string]bool{
		`input[name=name]`: true, `input[name=gpus]`: true, `select[name=team]`: true,
		`input[name=duration_s]`: true, `input[name=command]`: false,
		`input[name=mem_ephemeral_mib]`: false, `input[name=cpu_curve]`: false, `#advanced summary`: true,
	})
	if err := chromedp.Do(ctx, chromedp.Click(`input[name=kind][value=command]`)); err != nil {
		t.Fatal(err)
	}
	shown(map[string]bool{`input[name=command]`: true, `input[name=duration_s]`: false})
	if err := chromedp.Do(ctx, chromedp.Click(`#advanced summary`)); err != nil {
		t.Fatal(err)
	}
	shown(map[string]bool{`input[name=mem_ephemeral_mib]`: true, `input[name=sharing]`: true, `input[name=cpu_curve]`: true})
	// The sharing checkbox sits on its label's line.
	aligned, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const box = document.querySelector("input[name=sharing]").getBoundingClientRect();
		const label = document.querySelector("input[name=sharing]").closest("label").getBoundingClientRect();
		return box.left - label.left < 4 && box.height <= label.height;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if !aligned {
		t.Error("the sharing checkbox is not at the start of its label's line")
	}
	screenshot(t, ctx, "submit-advanced-phone")
	problems, err := sc.judge(phone, 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("submit page: %s", p)
	}

	if err := chromedp.Do(ctx,
		chromedp.SendKeys(`input[name=name]`, "confirm-me"),
		chromedp.SendKeys(`input[name=command]`, "sleep 120"),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(`#submit-job button[type=submit]`)); err != nil {
		t.Fatalf("submit: %v", err)
	}
	if err := waitFor(sc, "the job runs", `!!document.querySelector("#job-state .state-running")`, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// Cancel, answer no: nothing happens.
	if err := answerConfirm(sc, false); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, clickSwapped(`form[action$="/cancel"] button`)); err != nil {
		t.Fatal(err)
	}
	q, err := asked(sc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(q, "Cancel job ") || !strings.Contains(q, "(confirm-me)") {
		t.Errorf("cancelling asked %q, want the job's number and name", q)
	}
	afterPasses(t, srv.URL, 3) // a cancel would have been carried out
	if err := waitFor(sc, "the job still runs after a no", `!!document.querySelector("#job-state .state-running")`, time.Second); err != nil {
		t.Fatal(err)
	}
	// Answer yes: it is cancelled.
	if err := answerConfirm(sc, true); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.RunResponse(ctx, clickSwapped(`form[action$="/cancel"] button`)); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := waitFor(sc, "the job is cancelled", `!!document.querySelector("#job-state .state-cancelled")`, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// An admin's cordon asks; a no leaves the machine ready.
	if err := sc.login("admin"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/cluster"), chromedp.WaitVisible(`form[action="/cluster/nodes/node-0/cordon"]`)); err != nil {
		t.Fatalf("cluster page: %v", err)
	}
	if err := answerConfirm(sc, false); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, clickSwapped(`form[action="/cluster/nodes/node-0/cordon"] button`)); err != nil {
		t.Fatal(err)
	}
	if q, err := asked(sc); err != nil || !strings.HasPrefix(q, "Cordon node-0?") {
		t.Errorf("cordoning asked %q (%v), want \"Cordon node-0? ...\"", q, err)
	}
	afterPasses(t, srv.URL, 3) // a cordon would have been applied and shown
	state, err := textOf(ctx, `.node-head .state`)
	if err != nil {
		t.Fatal(err)
	}
	if state != "ready" {
		t.Errorf("node-0 is %q after a no, want ready", state)
	}
}
