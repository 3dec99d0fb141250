package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Issue 29, finding 1: a session's page ran on the portal's origin, so
// alice's web app, opened by an admin, read /admin and created an admin,
// and installed a service worker over the portal. Here the same page
// (testdata/session-attack) is opened by an admin in Chromium, with the
// sessions on their own origin (serve --dev's *.localhost) and sandboxed
// on the portal's origin (--session-origin ""): whatever it tries, the
// portal is unchanged, judged from the portal itself.

// attackResult is what testdata/session-attack/attack.js reports.
type attackResult struct {
	Origin string `json:"origin"`
	Read   string `json:"read"`
	Post   string `json:"post"`
	Blind  string `json:"blind"`
	Worker string `json:"worker"`
	Cookie string `json:"cookie"`
}

// needPython returns the system's python3 (a job's environment is
// minimal: a pyenv shim would not run there).
func needPython(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	p, err := exec.LookPath("python3")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no python3: scripts/ensure-jupyter installs it")
	}
	t.Skip("no python3")
	return ""
}

func TestSessionPageCannotActAsViewer(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	python := needPython(t)
	serve, err := filepath.Abs("../testdata/session-attack/serve.py")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		args []string
		// host: the page runs on a host of its own, not sandboxed on the
		// portal's.
		host bool
	}{
		{"own origin", nil, true},
		{"sandboxed on the portal's origin", []string{"--session-origin", ""}, false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			srv := startServer(t, append([]string{"--data", t.TempDir(), "--max-retries", "0"}, mode.args...)...)
			alice := newAPI(t, srv.URL, "alice", "dev")
			admin := newAPI(t, srv.URL, "admin", "dev")
			app := startSession(t, alice, map[string]any{"name": "app", "gpus": 1, "command": []string{python, serve},
				"env": map[string]string{"PORTAL": srv.URL}, "session": map[string]any{"type": "web"}})
			usersBefore := userNames(t, admin)

			ctx := newTabFor(t, 90*time.Second)
			loginInTab(t, ctx, srv.URL, "admin", "dev")
			before := portalCookies(t, ctx, srv.URL)
			if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+app.Session.URL)); err != nil {
				t.Fatal(err)
			}
			var title string
			eventually(t, 30*time.Second, "the app's page to finish", func() bool {
				title, _ = chromedp.Run(ctx, chromedp.Title())
				return strings.HasPrefix(title, "done ")
			})
			screenshot(t, ctx, "session-attack-"+strings.Fields(mode.name)[0])
			var r attackResult
			if err := json.Unmarshal([]byte(strings.TrimPrefix(title, "done ")), &r); err != nil {
				t.Fatalf("the page's result %q: %v", title, err)
			}
			t.Logf("the page, opened by the admin, at %s: %+v", r.Origin, r)
			// Its own host's origin, or an opaque one ("null") in the sandbox.
			if want := "null"; mode.host && !strings.HasSuffix(r.Origin, ".localhost"+srv.URL[strings.LastIndexByte(srv.URL, ':'):]) ||
				!mode.host && r.Origin != want {
				t.Errorf("the page ran at origin %q (the portal is %s)", r.Origin, srv.URL)
			}
			if !strings.HasPrefix(r.Read, "blocked") || r.Post != "" {
				t.Errorf("the page read the admin's page: %q, then %q", r.Read, r.Post)
			}
			// Judged from the portal: no new account, the admin's cookies
			// as they were, no service worker over the portal's pages.
			if after := userNames(t, admin); after != usersBefore {
				t.Errorf("the accounts changed while the page ran: %s, then %s", usersBefore, after)
			}
			if after := portalCookies(t, ctx, srv.URL); after != before {
				t.Errorf("the portal's cookies changed while the page ran:\n%s\nthen\n%s", before, after)
			}
			if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/jobs"), chromedp.WaitVisible(`#jobs`)); err != nil {
				t.Fatalf("the portal's jobs page after the app ran: %v", err)
			}
			workers, err := chromedp.Run(ctx, chromedp.Evaluate[int](`navigator.serviceWorker.getRegistrations().then(r => r.length)`, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatal(err)
			}
			if workers != 0 {
				t.Errorf("%d service workers over the portal's pages", workers)
			}
		})
	}
}

// userNames lists the accounts, as the admin's API shows them.
func userNames(t *testing.T, admin *api) string {
	t.Helper()
	var users []struct {
		Name string `json:"name"`
	}
	if st := admin.do(http.MethodGet, "/api/v1/users", nil, &users); st != http.StatusOK {
		t.Fatalf("list users: %d", st)
	}
	names := make([]string, len(users))
	for i, u := range users {
		names[i] = u.Name
	}
	return strings.Join(names, ",")
}

// portalCookies lists the cookies Chromium holds for the portal.
func portalCookies(t *testing.T, ctx context.Context, base string) string {
	t.Helper()
	var out []string
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
		for _, c := range res.Cookies {
			out = append(out, fmt.Sprintf("%s=%s (domain %s)", c.Name, c.Value, c.Domain))
		}
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// loginInTab logs user in, in the tab.
func loginInTab(t *testing.T, ctx context.Context, base, user, password string) {
	t.Helper()
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, user),
		chromedp.SendKeys(`input[name=password]`, password),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#jobs`),
	)
	if err != nil {
		t.Fatalf("log in as %s in Chromium: %v", user, err)
	}
}
