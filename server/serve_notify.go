package server

import (
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/notify"
	"github.com/gpuportal/gpuportal/outbound"
)

// smtpPasswordEnv holds the SMTP password when no file is given.
const smtpPasswordEnv = "GPUPORTAL_SMTP_PASSWORD"

// notifyFlags configure users' notifications (docs/operations.md): the
// portal's public URL for the links, the SMTP server of email, and the
// retries.
type notifyFlags struct {
	publicURL      string
	smtpAddr       string
	smtpFrom       string
	smtpUser       string
	smtpPassFile   string
	webhookTimeout time.Duration
	retryBase      time.Duration
	heldCheck      time.Duration
	// webhookAllow is --webhook-allow, read into webhooks by check.
	webhookAllow string
	webhooks     *outbound.Policy
}

func (n *notifyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.publicURL, "public-url", "", "the portal's address as users reach it (https://gpus.example.org), for the links in notifications (default: the address it listens on)")
	fs.StringVar(&n.smtpAddr, "smtp-addr", "", "SMTP server of email notifications, host:port (STARTTLS is used when offered); empty: no email")
	fs.StringVar(&n.smtpFrom, "smtp-from", "", "sender address of email notifications (gpuportal@example.org)")
	fs.StringVar(&n.smtpUser, "smtp-user", "", "SMTP user, when the server wants authentication (the password from --smtp-password-file or $"+smtpPasswordEnv+")")
	fs.StringVar(&n.smtpPassFile, "smtp-password-file", "", "file holding the SMTP password (its first line); default: $"+smtpPasswordEnv)
	fs.StringVar(&n.webhookAllow, "webhook-allow", "", "where users' webhooks may go besides the Internet: comma-separated CIDRs, addresses and host names, each with an optional port (10.0.0.0/8,hooks.lab.internal:443); without it, webhooks to loopback, private, link-local and this server's own addresses are refused")
	fs.DurationVar(&n.webhookTimeout, "webhook-timeout", 10*time.Second, "time a webhook receiver has to answer before the attempt counts as failed")
	fs.DurationVar(&n.heldCheck, "notify-held-check", 30*time.Second, "how often waiting jobs are checked for users' \"waiting too long\" (held) notifications")
	fs.DurationVar(&n.retryBase, "notify-retry", 30*time.Second, "wait before a failed notification is tried again; it doubles each time, up to 1h, for 12 attempts")
}

// check validates the flags.
func (n *notifyFlags) check() error {
	if n.publicURL != "" {
		u, err := url.Parse(n.publicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("serve: --public-url %q: want an http or https URL such as https://gpus.example.org", n.publicURL)
		}
		n.publicURL = strings.TrimRight(n.publicURL, "/")
	}
	if n.smtpAddr == "" && (n.smtpFrom != "" || n.smtpUser != "" || n.smtpPassFile != "") {
		return fmt.Errorf("serve: --smtp-from, --smtp-user and --smtp-password-file need --smtp-addr")
	}
	if n.smtpAddr != "" && n.smtpFrom == "" {
		return fmt.Errorf("serve: --smtp-addr needs --smtp-from, the sender's address")
	}
	if n.smtpAddr != "" {
		if err := notify.CheckMailer(&notify.Mailer{Addr: n.smtpAddr, From: n.smtpFrom}); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	allow, err := outbound.Parse(n.webhookAllow)
	if err != nil {
		return fmt.Errorf("serve: --webhook-allow %w", err)
	}
	n.webhooks = allow
	if n.webhookTimeout < time.Second || n.webhookTimeout > 5*time.Minute {
		return fmt.Errorf("serve: --webhook-timeout %v: want 1s to 5m", n.webhookTimeout)
	}
	if n.heldCheck < time.Second || n.heldCheck > time.Hour {
		return fmt.Errorf("serve: --notify-held-check %v: want 1s to 1h", n.heldCheck)
	}
	if n.retryBase < 100*time.Millisecond || n.retryBase > time.Hour {
		return fmt.Errorf("serve: --notify-retry %v: want 100ms to 1h", n.retryBase)
	}
	return nil
}

// mailer is the SMTP configuration, nil without --smtp-addr. The
// password is read from its file or the environment, never from the
// command line, where other users of the machine could read it.
func (n *notifyFlags) mailer(getenv func(string) string) (*notify.Mailer, error) {
	if n.smtpAddr == "" {
		return nil, nil
	}
	m := &notify.Mailer{Addr: n.smtpAddr, From: n.smtpFrom, Username: n.smtpUser}
	if err := notify.CheckMailer(m); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if n.smtpUser == "" {
		return m, nil
	}
	if n.smtpPassFile != "" {
		b, err := os.ReadFile(n.smtpPassFile)
		if err != nil {
			return nil, fmt.Errorf("serve: --smtp-password-file: %w", err)
		}
		m.Password, _, _ = strings.Cut(string(b), "\n")
		m.Password = strings.TrimRight(m.Password, "\r")
	} else {
		m.Password = getenv(smtpPasswordEnv)
	}
	if m.Password == "" {
		return nil, fmt.Errorf("serve: --smtp-user %s has no password: give --smtp-password-file or set $%s", n.smtpUser, smtpPasswordEnv)
	}
	return m, nil
}

// linkBase is the URL the notifications' links start with: --public-url,
// or the address the server listens on.
func (n *notifyFlags) linkBase(ln net.Addr) string {
	if n.publicURL != "" {
		return n.publicURL
	}
	if t, ok := ln.(*net.TCPAddr); ok && t.IP.IsUnspecified() {
		// Listening on every address: the machine's name is the best guess.
		if h, err := os.Hostname(); err == nil && h != "" {
			return "http://" + net.JoinHostPort(h, fmt.Sprint(t.Port))
		}
	}
	return "http://" + ln.String()
}
