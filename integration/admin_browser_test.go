package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// formStep fills one form of a page and submits it with its button.
type formStep struct {
	what   string
	form   string            // the form's action
	fields map[string]string // field name -> value
	status int               // the status of the page that comes back
	shows  string            // the text that page must show
}

// submitForm fills the fields of the form with action step.form, presses
// its submit button, waits for the page that answers and checks its
// status and text.
func submitForm(sc *screenChecker, step formStep) error {
	form := fmt.Sprintf(`form[action=%q]`, step.form)
	var actions []chromedp.Action[chromedp.Void]
	for name, v := range step.fields {
		sel := fmt.Sprintf(`%s [name=%q]`, form, name)
		actions = append(actions, chromedp.SetValue(sel, v))
	}
	if err := chromedp.Do(sc.ctx, actions...); err != nil {
		return fmt.Errorf("%s: fill the form: %w", step.what, err)
	}
	resp, err := chromedp.RunResponse(sc.ctx, chromedp.Click(form+` button[type=submit]`))
	if err != nil {
		return fmt.Errorf("%s: submit: %w", step.what, err)
	}
	if int(resp.Status) != step.status {
		return fmt.Errorf("%s: answered %d, want %d", step.what, resp.Status, step.status)
	}
	text, err := chromedp.Run(sc.ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		return fmt.Errorf("%s: read the page: %w", step.what, err)
	}
	if !strings.Contains(text, step.shows) {
		return fmt.Errorf("%s: the page does not show %q:\n%s", step.what, step.shows, text)
	}
	return nil
}

// TestBrowserAdminForms has an admin use every form of the admin page in
// a browser, at a laptop's and a phone's width: create a team, create a
// researcher in it, make them a lead of another team, reset their
// password; then the new user logs in with that password and the portal
// shows their role. A refused form says which field is wrong.
func TestBrowserAdminForms(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	browser := newTabFor(t, 3*time.Minute)
	srv := startServer(t, "--data", t.TempDir())
	startChromium(t, browser)
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			sc := tabAs(t, browser, srv.URL, "admin", vp)
			ctx := sc.ctx
			if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/admin"), chromedp.WaitVisible(`#users`)); err != nil {
				t.Fatalf("admin page: %v", err)
			}
			team, user := "robotics-"+vp.name, "carol-"+vp.name
			steps := []formStep{
				{"create a team", "/admin/create-team", map[string]string{"name": team, "guarantee": "1"}, 200,
					"Team " + team + " created."},
				{"create a researcher", "/admin/create-user", map[string]string{"name": user, "role": "researcher", "team": team, "password": "first password"}, 200,
					"User " + user + " created."},
				{"create the same user again", "/admin/create-user", map[string]string{"name": user, "role": "researcher", "team": team, "password": "first password"}, 400,
					"name: user " + user + " already exists"},
				{"make them a lead of vision", "/admin/set-role", map[string]string{"name": user, "role": "lead", "team": "vision"}, 200,
					user + ` is now lead of "vision".`},
				{"reset their password", "/admin/reset-password", map[string]string{"name": user, "password": "second password"}, 200,
					"Password of " + user + " reset:"},
			}
			for _, step := range steps {
				if err := submitForm(sc, step); err != nil {
					t.Fatal(err)
				}
				problems, err := sc.judge(vp, step.status)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range problems {
					t.Errorf("after %s: %s", step.what, p)
				}
			}
			text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text, team+"\t1") {
				t.Errorf("the admin page has no row %q:\n%s", team+"\t1", text)
			}
			// The users table is a table on a laptop and cards on a phone:
			// its cells, not its layout, say who the user is.
			cells, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#users tr[data-user="`+user+`"] td')].slice(0, 3).map(td => td.textContent.trim()).join("\t")`))
			if err != nil {
				t.Fatal(err)
			}
			if want := user + "\tlead\tvision"; cells != want {
				t.Errorf("the users table's row of %s says %q, want %q", user, cells, want)
			}
			// The new lead logs in with the new password and sees their role.
			err = chromedp.Do(ctx,
				chromedp.Navigate(srv.URL+"/jobs"),
				chromedp.Click(`header form[action="/logout"] button`),
				chromedp.WaitVisible(`input[name=username]`),
				chromedp.SendKeys(`input[name=username]`, user),
				chromedp.SendKeys(`input[name=password]`, "second password"),
				chromedp.Submit(`input[name=password]`),
				chromedp.WaitVisible(`header .who`),
			)
			if err != nil {
				t.Fatalf("log in as %s: %v", user, err)
			}
			who, err := chromedp.Run(ctx, chromedp.Text(`header .who`))
			if err != nil {
				t.Fatal(err)
			}
			if want := user + " · lead · vision"; strings.Join(strings.Fields(who), " ") != want {
				t.Errorf("the header says %q, want %q", who, want)
			}
		})
	}
}
