package server

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNotifyFlags: serve's notification flags are checked before
// anything starts, each error naming its flag.
func TestNotifyFlags(t *testing.T) {
	checkServeFlags(t, []flagCase{
		{"none", nil, ""},
		{"all", []string{"--public-url", "https://gpus.example.org/", "--smtp-addr", "mail.example.org:587", "--smtp-from", "gpuportal@example.org",
			"--smtp-user", "portal", "--webhook-timeout", "5s", "--notify-retry", "1m"}, ""},
		{"public URL not http", []string{"--public-url", "gpus.example.org"}, "--public-url"},
		{"SMTP without a sender", []string{"--smtp-addr", "mail.example.org:587"}, "--smtp-from"},
		{"SMTP without a port", []string{"--smtp-addr", "mail.example.org", "--smtp-from", "a@example.org"}, "--smtp-addr"},
		{"a sender that is no address", []string{"--smtp-addr", "mail.example.org:25", "--smtp-from", "gpuportal"}, "--smtp-from"},
		{"a user without a server", []string{"--smtp-user", "portal"}, "--smtp-addr"},
		{"a webhook timeout too short", []string{"--webhook-timeout", "10ms"}, "--webhook-timeout"},
		{"a retry too long", []string{"--notify-retry", "3h"}, "--notify-retry"},
		{"held checks too often", []string{"--notify-held-check", "10ms"}, "--notify-held-check"},
		{"webhooks allowed to networks, addresses and names", []string{"--webhook-allow", "10.0.0.0/8, 127.0.0.1:9000,[fd00::1]:443,hooks.lab.internal"}, ""},
		{"a webhook allowance that is no address", []string{"--webhook-allow", "10.0.0.0/8,http://hooks.lab"}, "--webhook-allow"},
		{"a webhook allowance with a bad port", []string{"--webhook-allow", "127.0.0.1:99999"}, "--webhook-allow"},
	})
}

// TestServeContainerNetworkFlag: the built-in agents' containers get a
// network of their own unless --container-network host says otherwise,
// which needs containers.
func TestServeContainerNetworkFlag(t *testing.T) {
	checkServeFlags(t, []flagCase{
		{"private", []string{"--container-runtime", "podman", "--container-network", "private"}, ""},
		{"host", []string{"--container-runtime", "podman", "--container-network", "host"}, ""},
		{"neither", []string{"--container-runtime", "podman", "--container-network", "none"}, "-container-network"},
		{"host without containers", []string{"--container-network", "host"}, "--container-network host needs --container-runtime"},
	})
}

// flagCase is serve run with args: valid when want is "", else refused
// with an error naming want.
type flagCase struct {
	name string
	args []string
	want string
}

// checkServeFlags parses each case's flags as serve does.
func checkServeFlags(t *testing.T, cases []flagCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseServeFlags(c.args, io.Discard)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v; want one naming %s", err, c.want)
			}
		})
	}
}

// TestSMTPPassword: the password comes from its file or the environment,
// never a flag, and a user without one is refused.
func TestSMTPPassword(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-file\r\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == smtpPasswordEnv {
				return v
			}
			return ""
		}
	}
	base := notifyFlags{smtpAddr: "mail.example.org:587", smtpFrom: "a@example.org", smtpUser: "portal"}
	f := base
	f.smtpPassFile = file
	if m, err := f.mailer(env("from-env")); err != nil || m.Password != "from-file" {
		t.Errorf("from the file: %v", err)
	}
	if m, err := base.mailer(env("from-env")); err != nil || m.Password != "from-env" {
		t.Errorf("from the environment: %v", err)
	}
	if _, err := base.mailer(env("")); err == nil || !strings.Contains(err.Error(), smtpPasswordEnv) {
		t.Errorf("no password: %v", err)
	}
	if m, err := (&notifyFlags{}).mailer(env("")); m != nil || err != nil {
		t.Errorf("no SMTP: %v, %v", m, err)
	}
	if got := (&notifyFlags{}).linkBase(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}); got != "http://127.0.0.1:8080" {
		t.Errorf("link base %q", got)
	}
	if got := (&notifyFlags{publicURL: "https://gpus.example.org"}).linkBase(nil); got != "https://gpus.example.org" {
		t.Errorf("link base %q", got)
	}
}
