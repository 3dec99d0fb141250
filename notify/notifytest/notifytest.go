// Package notifytest gives tests a real SMTP server (github.com/emersion/go-smtp)
// that keeps what it receives, to check what package notify sends.
package notifytest

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Mail is one message the server accepted.
type Mail struct {
	From string
	To   []string
	Data string // headers and body as received
	// User is who authenticated, "" for nobody; TLS whether the
	// connection was encrypted (STARTTLS) when the message came.
	User string
	TLS  bool
}

// SMTPOptions configure a test SMTP server.
type SMTPOptions struct {
	// User and Password, when set, are required (AUTH PLAIN).
	User, Password string
	// TLS, when set, is offered by STARTTLS.
	TLS *tls.Config
}

// SMTPServer is a running test SMTP server.
type SMTPServer struct {
	Addr string

	mu    sync.Mutex
	mails []Mail
	added chan struct{}
}

// StartSMTP starts an SMTP server on a free loopback port, stopped when t
// ends.
func StartSMTP(t testing.TB, opt SMTPOptions) *SMTPServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &SMTPServer{Addr: ln.Addr().String(), added: make(chan struct{}, 1)}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{srv: s, opt: opt, conn: c}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.TLSConfig = opt.TLS
	// Without TLS the test sends its password in the clear, on loopback.
	srv.AllowInsecureAuth = opt.TLS == nil
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return s
}

// Mails returns the messages received so far.
func (s *SMTPServer) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mails...)
}

// Wait waits up to timeout until n messages came, and returns them.
func (s *SMTPServer) Wait(t testing.TB, n int, timeout time.Duration) []Mail {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if ms := s.Mails(); len(ms) >= n {
			return ms
		}
		select {
		case <-s.added:
		case <-deadline:
			t.Fatalf("the SMTP server got %d messages in %v; want %d", len(s.Mails()), timeout, n)
		}
	}
}

type session struct {
	srv  *SMTPServer
	opt  SMTPOptions
	conn *smtp.Conn
	user string
	mail Mail
}

func (s *session) AuthMechanisms() []string {
	if s.opt.User == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.opt.User || pass != s.opt.Password {
			return errors.New("invalid credentials")
		}
		s.user = user
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.opt.User != "" && s.user == "" {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "authentication required"}
	}
	s.mail = Mail{From: from, User: s.user}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.mail.To = append(s.mail.To, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mail.Data = string(b)
	_, s.mail.TLS = s.conn.TLSConnectionState()
	s.srv.mu.Lock()
	s.srv.mails = append(s.srv.mails, s.mail)
	s.srv.mu.Unlock()
	select {
	case s.srv.added <- struct{}{}:
	default:
	}
	return nil
}

func (s *session) Reset()        { s.mail = Mail{} }
func (s *session) Logout() error { return nil }
