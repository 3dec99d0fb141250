package notify

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"os"
	"strings"
	"time"
)

// Mailer sends email through one SMTP server: STARTTLS whenever the
// server offers it, and PLAIN authentication when a user is set (never
// over a connection that is not encrypted, except to the local host).
type Mailer struct {
	Addr     string // host:port
	From     string // the sender's address
	Username string
	Password string
	// TLS configures STARTTLS; nil: the system's roots, the Addr's host.
	TLS *tls.Config
	// Timeout bounds one message's whole conversation; default 30s.
	Timeout time.Duration
}

// CheckMailer says what is wrong with m's configuration, naming the flag.
func CheckMailer(m *Mailer) error {
	host, port, err := net.SplitHostPort(m.Addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("--smtp-addr %q: want host:port (port 587 for submission, 25 for a relay)", m.Addr)
	}
	a, err := mail.ParseAddress(m.From)
	if err != nil || a.Address == "" {
		return fmt.Errorf("--smtp-from %q: want an email address (gpuportal@example.org)", m.From)
	}
	return nil
}

// Send sends one plain-text message to to.
func (m *Mailer) Send(ctx context.Context, to, subject, body string) error {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host, _, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return fmt.Errorf("smtp address: %w", err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return fmt.Errorf("connect to the SMTP server: %w", err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return fmt.Errorf("smtp greeting: %w", err)
	}
	defer c.Close()
	if err := c.Hello(helloName()); err != nil {
		return fmt.Errorf("smtp EHLO: %w", err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		cfg := m.TLS
		if cfg == nil {
			cfg = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		if err := c.StartTLS(cfg); err != nil {
			return fmt.Errorf("smtp STARTTLS: %w", err)
		}
	}
	if m.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return errors.New("smtp: a user is configured (--smtp-user) but the server offers no authentication")
		}
		if err := c.Auth(smtp.PlainAuth("", m.Username, m.Password, host)); err != nil {
			return fmt.Errorf("smtp AUTH as %s: %w", m.Username, err)
		}
	}
	from, err := mail.ParseAddress(m.From)
	if err != nil {
		return fmt.Errorf("--smtp-from: %w", err)
	}
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("smtp RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if _, err := w.Write(compose(m.From, to, subject, body, time.Now())); err != nil {
		return fmt.Errorf("smtp: write the message: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp: the server refused the message: %w", err)
	}
	if err := c.Quit(); err != nil {
		return fmt.Errorf("smtp QUIT: %w", err)
	}
	return nil
}

// compose writes a message: headers (the subject encoded, line breaks
// taken out of every header) and a quoted-printable UTF-8 body.
func compose(from, to, subject, body string, now time.Time) []byte {
	var b strings.Builder
	clean := func(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	domain := "gpuportal"
	if a, err := mail.ParseAddress(from); err == nil {
		if i := strings.LastIndex(a.Address, "@"); i >= 0 {
			domain = a.Address[i+1:]
		}
	}
	fmt.Fprintf(&b, "From: %s\r\n", clean(from))
	fmt.Fprintf(&b, "To: %s\r\n", clean(to))
	fmt.Fprintf(&b, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", clean(subject)))
	fmt.Fprintf(&b, "Date: %s\r\n", now.Format(time.RFC1123Z))
	fmt.Fprintf(&b, "Message-ID: <%s@%s>\r\n", hex.EncodeToString(id), clean(domain))
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n")
	b.WriteString("Auto-Submitted: auto-generated\r\n\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(body, "\n", "\r\n")))
	_ = qp.Close()
	b.WriteString("\r\n")
	return []byte(b.String())
}

// helloName is the name this host gives in EHLO.
func helloName() string {
	if h, err := os.Hostname(); err == nil && h != "" && !strings.ContainsAny(h, " \r\n") {
		return h
	}
	return "localhost"
}
