package integration

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuportal/gpuportal/notify/notifytest"
)

// TestBrowserNotifications has a user set their notifications on the
// page linked from the header and send a test, at a laptop's and a
// phone's width: the email arrives at a real SMTP server, the webhook
// whose receiver is down shows its failure and next try in the table,
// a bad URL is refused naming the field, and the page fits the window.
func TestBrowserNotifications(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	mail := notifytest.StartSMTP(t, notifytest.SMTPOptions{})
	// A port nobody listens on: the receiver is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/hook"
	ln.Close()
	browser := newTabFor(t, 2*time.Minute)
	srv := startServer(t, "--data", t.TempDir(), "--smtp-addr", mail.Addr, "--smtp-from", "gpuportal@example.org", "--notify-retry", "1m",
		"--webhook-allow", webhookAllow)
	startChromium(t, browser)
	for i, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			sc := tabAs(t, browser, srv.URL, "alice", vp)
			ctx := sc.ctx
			// The header's link leads to the page.
			err := chromedp.Do(ctx, chromedp.Click(`header .account a[href="/notifications"]`), chromedp.WaitVisible(`#notify-settings`))
			if err != nil {
				t.Fatalf("follow the header's link: %v", err)
			}
			steps := []formStep{
				{"a bad webhook URL", "/notifications", map[string]string{"email": "alice@example.org", "webhook_url": "ftp://example.org/x"}, 400,
					"webhook_url: scheme \"ftp\": want http or https"},
				{"save", "/notifications", map[string]string{"email": "alice@example.org", "webhook_url": down, "webhook_secret": "s3cret"}, 200,
					"Saved."},
			}
			for _, st := range steps {
				if err := submitForm(sc, st); err != nil {
					t.Fatal(err)
				}
			}
			if err := submitForm(sc, formStep{"send a test", "/notifications/test", nil, 200, "2 test notifications were queued"}); err != nil {
				t.Fatal(err)
			}
			mail.Wait(t, i+1, 30*time.Second)
			// The table refreshes itself: the email sent, the webhook failed, to be retried.
			eventually(t, 30*time.Second, "the table to show the delivery and the failure", func() bool {
				text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#deliveries').innerText`))
				if err != nil {
					t.Fatal(err)
				}
				return strings.Contains(text, "connection failed") && strings.Contains(text, "sent")
			})
			problems, err := sc.check(screen{"notifications", "/notifications", 200}, vp, "alice")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("/notifications at %s: %s", vp.name, p)
			}
		})
	}
}
