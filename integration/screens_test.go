package integration

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// viewport is a browser window size every page must fit.
type viewport struct {
	name          string
	width, height int64
}

// viewports are the sizes pages are checked at: a laptop and a phone.
var viewports = []viewport{{"wide", 1440, 900}, {"phone", 390, 844}}

// screen is one page as one user sees it, and the status it must answer.
type screen struct {
	name   string // the screenshot's name
	path   string
	status int
}

// templateText matches templ source that reached the page as text: a
// component call (@name(...)) or an expression in braces ({ x.Y }).
var templateText = regexp.MustCompile(`@[A-Za-z_][A-Za-z0-9_.]*\(|\{ [^{}\n]{1,80} \}`)

// browserLog collects what went wrong in a tab while it showed a page:
// console errors, uncaught exceptions and failed requests.
type browserLog struct {
	mu       sync.Mutex
	problems []string
	document int // the status of the last page loaded
}

// listen starts collecting the tab's problems.
func (b *browserLog) listen(ctx context.Context) error {
	return chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg = d.Exception.Description
			}
			b.problems = append(b.problems, fmt.Sprintf("uncaught exception at %s:%d: %s", d.URL, d.LineNumber, msg))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range ev.Args {
					if a.Description != "" {
						parts = append(parts, a.Description)
					} else {
						parts = append(parts, string(a.Value))
					}
				}
				b.problems = append(b.problems, "console error: "+strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			// The network's own entries repeat the failed responses,
			// which are judged below with the status they should have.
			if ev.Entry.Level == log.EntryLevelError && ev.Entry.Source != log.EntrySourceNetwork {
				b.problems = append(b.problems, fmt.Sprintf("browser error (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		case *network.EventResponseReceived:
			if ev.Type == network.ResourceTypeDocument {
				b.document = int(ev.Response.Status)
				return
			}
			if ev.Response.Status >= 400 {
				b.problems = append(b.problems, fmt.Sprintf("%s %s answered %d", ev.Type, ev.Response.URL, ev.Response.Status))
			}
		case *network.EventLoadingFailed:
			if !ev.Canceled && ev.Type != network.ResourceTypeDocument {
				b.problems = append(b.problems, fmt.Sprintf("%s request failed: %s", ev.Type, ev.ErrorText))
			}
		}
	})
}

// take returns the problems seen since the last call and the status of
// the last page loaded, and starts afresh.
func (b *browserLog) take() ([]string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, d := b.problems, b.document
	b.problems, b.document = nil, 0
	return p, d
}

// layoutReport is what a page's layout says about itself.
type layoutReport struct {
	ClientWidth int      `json:"clientWidth"`
	ScrollWidth int      `json:"scrollWidth"`
	Overflowing []string `json:"overflowing"` // the widest elements beyond the right edge
	Text        string   `json:"text"`
}

// measureLayout reads the page's width, the elements that stick out of
// the viewport and its visible text.
const measureLayout = `(() => {
	const de = document.documentElement, w = de.clientWidth;
	const out = [];
	for (const el of document.querySelectorAll("body *")) {
		const r = el.getBoundingClientRect();
		if (r.width === 0 || r.right <= w + 1) continue;
		let hidden = false;
		for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
			const ox = getComputedStyle(p).overflowX;
			if (ox === "auto" || ox === "scroll" || ox === "hidden") { hidden = true; break; }
		}
		if (hidden) continue;
		const id = el.id ? "#" + el.id : "";
		const cls = el.classList.length ? "." + [...el.classList].join(".") : "";
		out.push(el.tagName.toLowerCase() + id + cls + " (right edge " + Math.round(r.right) + ")");
		if (out.length >= 5) break;
	}
	return { clientWidth: w, scrollWidth: Math.max(de.scrollWidth, document.body.scrollWidth),
		overflowing: out, text: document.body.innerText };
})()`

// screenChecker visits pages in one tab and reports what is wrong with
// each; it saves a screenshot of each into dir when dir is not empty.
type screenChecker struct {
	ctx    context.Context
	base   string
	log    *browserLog
	dir    string
	settle time.Duration // how long a page may draw itself before it is judged
}

func newScreenChecker(t *testing.T, ctx context.Context, base string) *screenChecker {
	t.Helper()
	sc := &screenChecker{ctx: ctx, base: base, log: &browserLog{}, dir: os.Getenv("GPUPORTAL_SCREENSHOTS"), settle: 250 * time.Millisecond}
	if sc.dir != "" {
		// Live charts need a few samples before a picture shows them.
		sc.settle = 2 * time.Second
	}
	if err := sc.log.listen(ctx); err != nil {
		t.Fatalf("listen to the browser: %v", err)
	}
	return sc
}

// screensAs opens a tab for two minutes and a screenChecker in it on the
// portal at base, logged in as user: the start of a test that looks at
// the pages one user sees.
func screensAs(t *testing.T, base, user string) (context.Context, *screenChecker) {
	t.Helper()
	ctx := newTabFor(t, 2*time.Minute)
	sc := newScreenChecker(t, ctx, base)
	if err := sc.login(user); err != nil {
		t.Fatal(err)
	}
	return ctx, sc
}

// login logs in as user with the demo password, after logging out
// whoever was logged in.
func (sc *screenChecker) login(user string) error {
	err := chromedp.Do(sc.ctx,
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
			return err
		}),
		chromedp.Navigate(sc.base+"/login"),
		chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, user),
		chromedp.SendKeys(`input[name=password]`, "dev"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`header .who`),
	)
	if err != nil {
		return fmt.Errorf("log in as %s: %w", user, err)
	}
	sc.log.take()
	return nil
}

// check shows the page at the viewport, judges it and saves its picture
// as prefix-name-viewport.png when sc.dir is set.
func (sc *screenChecker) check(s screen, vp viewport, prefix string) ([]string, error) {
	sc.log.take()
	err := chromedp.Do(sc.ctx,
		chromedp.EmulateViewport(vp.width, vp.height),
		chromedp.Navigate(sc.base+s.path),
		chromedp.WaitReady(`body`),
	)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", s.path, vp.name, err)
	}
	time.Sleep(sc.settle) // about time: charts and fonts draw with no event to wait on
	problems, err := sc.judge(vp, s.status)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", s.path, vp.name, err)
	}
	if sc.dir != "" {
		png, err := chromedp.Run(sc.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			return nil, fmt.Errorf("%s at %s: screenshot: %w", s.path, vp.name, err)
		}
		name := fmt.Sprintf("%s-%s-%s.png", prefix, s.name, vp.name)
		if err := os.WriteFile(filepath.Join(sc.dir, name), png, 0o644); err != nil {
			return nil, fmt.Errorf("save %s: %w", name, err)
		}
	}
	return problems, nil
}

// visit shows path at the viewport, waits for the element wait matches,
// reports as errors of t everything wrong with the page (judge), and
// saves its picture as shot-viewport.png (screenshot). A page that does
// not come ends the test.
func (sc *screenChecker) visit(t *testing.T, vp viewport, path, wait, shot string) {
	t.Helper()
	sc.log.take()
	err := chromedp.Do(sc.ctx, chromedp.EmulateViewport(vp.width, vp.height), chromedp.Navigate(sc.base+path), chromedp.WaitVisible(wait))
	if err != nil {
		t.Fatalf("%s at %s: %v", path, vp.name, err)
	}
	problems, err := sc.judge(vp, http.StatusOK)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s at %s: %s", path, vp.name, p)
	}
	screenshot(t, sc.ctx, shot+"-"+vp.name)
}

// judge returns everything wrong with the page the tab shows since the
// last judgement: a status other than status, console errors, failed
// requests, a page wider than the viewport, template source as text.
func (sc *screenChecker) judge(vp viewport, status int) ([]string, error) {
	lr, err := chromedp.Run(sc.ctx, chromedp.Evaluate[layoutReport](measureLayout))
	if err != nil {
		return nil, fmt.Errorf("measure the layout: %w", err)
	}
	problems, got := sc.log.take()
	if got != status {
		problems = append(problems, fmt.Sprintf("page answered %d, want %d", got, status))
	}
	if lr.ScrollWidth > lr.ClientWidth {
		problems = append(problems, fmt.Sprintf("page is %d px wide in a %d px viewport; sticking out: %s",
			lr.ScrollWidth, lr.ClientWidth, strings.Join(lr.Overflowing, ", ")))
	}
	for _, m := range templateText.FindAllString(lr.Text, 3) {
		problems = append(problems, fmt.Sprintf("template source shown as text: %q", m))
	}
	return problems, nil
}

// firstJobLink waits until the jobs list shows a job and returns its path.
func (sc *screenChecker) firstJobLink(timeout time.Duration) (string, error) {
	if err := chromedp.Do(sc.ctx, chromedp.Navigate(sc.base+"/jobs")); err != nil {
		return "", fmt.Errorf("jobs list: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		href, err := chromedp.Run(sc.ctx, chromedp.Evaluate[string](
			`(document.querySelector("#jobs tbody a[href^='/jobs/']") || {getAttribute: () => ""}).getAttribute("href")`))
		if err != nil {
			return "", fmt.Errorf("jobs list: %w", err)
		}
		if href != "" {
			return href, nil
		}
		if time.Now().After(deadline) {
			return "", errors.New("no job in the team's list")
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// screensCursor is the jobs list's cursor of the jobs before job 9 (the
// server's encoding, web/joblist.go: "b9"): a second page.
var screensCursor = base64.RawURLEncoding.EncodeToString([]byte("b9"))

// screensOf are the pages user sees, the job page being job's, with the
// status each must answer.
func screensOf(user, job string, spec specJobs) []screen {
	s := []screen{
		{"jobs", "/jobs", 200},
		{"submit", "/jobs/new", 200},
		{"job", job, 200},
		{"job-spec", fmt.Sprint("/jobs/", spec.job), 200},
		{"resubmit", fmt.Sprint("/jobs/new?from=", spec.job), 200},
		{"array", fmt.Sprint("/arrays/", spec.array), 200},
		{"queues", "/queues", 200},
		{"teams", "/teams", 200},
		{"team-vision", "/teams/vision", 200},
		{"cluster", "/cluster", 200},
		{"accounting", "/accounting", 200},
		{"tokens", "/tokens", 200},
		{"sessions", "/sessions", 200},
		{"notifications", "/notifications", 200},
		{"not-found", "/no-such-page", 404},
		// The jobs list filtered, searched and paged; the demo's idle
		// notebook (job 1, alice's), flagged by now (--idle-after 20s).
		{"jobs-filtered", "/jobs?limit=3&kind=sim&q=-&state=running", 200},
		{"jobs-page-2", "/jobs?limit=3&cursor=" + screensCursor, 200},
		{"job-idle", "/jobs/1", 200},
		// The files of alice's idle notebook (job 1), through its agent:
		// its folder for those who see the job (issue 36, docs/files.md).
		{"job-files", "/jobs/1/files", 200},
		{"team-vision-flags", "/teams/vision", 200},
	}
	// Alice's own folder, the built-in machines' data path (serve --dev:
	// DATA/userdata/alice): hers and the admins' (docs/files.md).
	switch user {
	case "alice", "admin":
		s = append(s, screen{"job-files-data", "/jobs/1/files?root=data", 200})
	default:
		s = append(s, screen{"job-files-data-forbidden", "/jobs/1/files?root=data", 403})
	}
	switch user {
	case "admin":
		s = append(s, screen{"admin", "/admin", 200}, screen{"team-nlp", "/teams/nlp", 200}, screen{"whatif", "/admin/whatif", 200},
			screen{"machines", "/admin/machines", 200})
	default:
		s = append(s, screen{"admin-forbidden", "/admin", 403}, screen{"team-nlp-forbidden", "/teams/nlp", 403},
			screen{"whatif-forbidden", "/admin/whatif", 403}, screen{"machines-forbidden", "/admin/machines", 403})
	}
	return s
}

// TestScreens shows every page to every role at a laptop's and a
// phone's width, and fails on console errors, failed requests, pages
// wider than the window and template source shown as text. With
// GPUPORTAL_SCREENSHOTS set to a folder (scripts/screens does) it saves
// a picture of each for people to look at. Each role looks in its own
// tab, with its own cookies, at the same time.
func TestScreens(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	// A bound on a hang, not a measure of speed: on a loaded 2-core
	// machine the four roles' tabs took 111 s to reach the phone's width.
	limit := 5 * time.Minute
	if os.Getenv("GPUPORTAL_SCREENSHOTS") != "" {
		limit = 10 * time.Minute // pictures of long pages take a while
	}
	browser := newTabFor(t, limit)
	srv := startServer(t, "--data", t.TempDir(), "--demo", "--idle-after", "20s")
	spec := submitSpecJobs(t, srv.URL)
	startChromium(t, browser)
	start := time.Now()
	// The roles look at once, each in its own tab: t.Run from goroutines
	// rather than t.Parallel, which go test limits to one per CPU.
	var wg sync.WaitGroup
	for _, user := range []string{"guest", "alice", "lead", "admin"} {
		wg.Go(func() {
			t.Run(user, func(t *testing.T) { checkScreensOf(t, browser, srv.URL, user, spec) })
		})
	}
	wg.Wait()
	t.Logf("checked every screen in %v", time.Since(start).Round(time.Millisecond))
}

// checkScreensOf checks every page user sees, in a tab of its own.
func checkScreensOf(t *testing.T, browser context.Context, base, user string, spec specJobs) {
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancel()
	sc := newScreenChecker(t, ctx, base)
	// A visitor who is not logged in is sent to the login page from any
	// path: no page tells them which paths exist.
	screens := []screen{{"login", "/login", 200}, {"login-from-unknown", "/no-such-page", 200}}
	if user != "guest" {
		if err := sc.login(user); err != nil {
			t.Fatal(err)
		}
		job, err := sc.firstJobLink(20 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		screens = screensOf(user, job, spec)
	}
	for _, vp := range viewports {
		for _, s := range screens {
			problems, err := sc.check(s, vp, user)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("%s at %s (%dx%d): %s", s.path, vp.name, vp.width, vp.height, p)
			}
		}
	}
}

// specJobs are alice's jobs that show what a job may run with: one with
// its variables, folder, time limit, retries and a dependency, and an
// array of tasks with parameters.
type specJobs struct{ job, array int64 }

func submitSpecJobs(t *testing.T, base string) specJobs {
	t.Helper()
	a := newAPI(t, base, "alice", "dev")
	var first, j, arr struct{ ID int64 }
	for _, sub := range []struct {
		body map[string]any
		into *struct{ ID int64 }
	}{
		{map[string]any{"name": "prepare-data", "gpus": 1, "sim": map[string]any{"duration_s": 30}}, &first},
		{map[string]any{"name": "resnet50-finetune", "gpus": 1, "sim": map[string]any{"duration_s": 600},
			"env":     map[string]string{"LR": "3e-4", "WANDB_MODE": "offline", "DATA": "/datasets/imagenet-subset-with-a-long-name"},
			"workdir": "/tmp", "time_limit": "2h", "retries": 2}, &j},
		{map[string]any{"name": "lr-sweep", "gpus": 1, "sim": map[string]any{"duration_s": 120}, "array": "0-5%2",
			"array_params": "LR,BATCH\n0.1,32\n0.03,32\n0.01,64\n0.003,64\n0.001,128\n0.0003,128\n"}, &arr},
	} {
		if sub.into == &j {
			sub.body["dependencies"] = []map[string]any{{"kind": "after_ok", "job_id": first.ID}}
		}
		if st := a.do(http.MethodPost, "/api/v1/jobs", sub.body, sub.into); st != http.StatusCreated {
			t.Fatalf("submit %v: status %d", sub.body["name"], st)
		}
	}
	return specJobs{job: j.ID, array: arr.ID}
}
