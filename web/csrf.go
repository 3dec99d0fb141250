package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"

	"github.com/labstack/echo/v4"
)

// CSRF protection of the portal's forms. A logged-in browser's token is
// bound to its session: an HMAC of the session cookie's secret, which
// only this browser holds (the cookie is HttpOnly), so a token seen on
// one session is worthless with another, and it ends with its session.
// Any replica computes it alike, with nothing stored. Before login (the
// login form itself) the token is a random value kept in a cookie of
// its own and sent back with the form: double submit. A double submit
// alone is beaten by a cookie an attacker plants (from a sibling
// subdomain, or over plain HTTP), which would let another site log a
// visitor in to the attacker's account; so over TLS the cookie is a
// __Host- cookie, which only this origin can set, the login POST must
// come from this site (sameSiteLogin), and the cookie ends at login,
// where the session's own token takes over.

const (
	csrfCookie = "gpuportal_csrf"
	// csrfHostCookie is csrfCookie over TLS: browsers take a __Host-
	// cookie only from a secure origin, for path / and no Domain, so
	// neither a sibling subdomain nor a man in the middle of plain HTTP
	// can plant it.
	csrfHostCookie = "__Host-" + csrfCookie
	csrfField      = "_csrf"
	csrfHeader     = "X-CSRF-Token"
	csrfKey        = "csrf"
)

// csrfCookieName is the pre-session token's cookie on this server.
func (s *Server) csrfCookieName() string {
	if s.cfg.SecureCookies {
		return csrfHostCookie
	}
	return csrfCookie
}

// sessionCSRF is the CSRF token of the session whose cookie holds secret.
func sessionCSRF(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("gpuportal csrf v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// csrf checks the token of every request that changes something, and
// puts the token for the page's forms in the context.
func (s *Server) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		want, err := s.expectedCSRF(c)
		if err != nil {
			return err
		}
		c.Set(csrfKey, want)
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		got := c.Request().Header.Get(csrfHeader)
		if got == "" {
			got = c.FormValue(csrfField)
		}
		if err := checkCSRF(c, got); err != nil {
			return err
		}
		return next(c)
	}
}

// csrfStreamed is csrf for a form whose body streams to where it goes (a
// file upload), which must not be read whole to find its token: a token
// in the header is checked here; else the handler checks the one among
// the form's first fields with checkCSRF before it reads the file.
func (s *Server) csrfStreamed(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		want, err := s.expectedCSRF(c)
		if err != nil {
			return err
		}
		c.Set(csrfKey, want)
		if got := c.Request().Header.Get(csrfHeader); got != "" {
			if err := checkCSRF(c, got); err != nil {
				return err
			}
			c.Set(csrfCheckedKey, true)
		}
		return next(c)
	}
}

// csrfCheckedKey marks a request whose token csrfStreamed checked.
const csrfCheckedKey = "csrf-checked"

// checkCSRF refuses token got unless it is the request's own (csrf
// put it in the context).
func checkCSRF(c echo.Context, got string) error {
	want, _ := c.Get(csrfKey).(string)
	if got == "" || want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return echo.NewHTTPError(http.StatusForbidden, "The form has expired or did not come from this site: reload the page and try again.")
	}
	return nil
}

// expectedCSRF is the token the request's forms carry: its session's, or
// before login the pre-session cookie's, which it sets when missing.
func (s *Server) expectedCSRF(c echo.Context) (string, error) {
	if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" {
		return sessionCSRF(ck.Value), nil
	}
	if ck, err := c.Cookie(s.csrfCookieName()); err == nil && len(ck.Value) == 64 {
		return ck.Value, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	c.SetCookie(&http.Cookie{Name: s.csrfCookieName(), Value: tok, Path: "/", HttpOnly: true,
		Secure: s.cfg.SecureCookies, SameSite: http.SameSiteStrictMode, MaxAge: 86400})
	return tok, nil
}

// endPreSessionCSRF clears the pre-session token at login: from then on
// the session's own token is the form's, and a token seen before login
// is worth nothing.
func (s *Server) endPreSessionCSRF(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: s.csrfCookieName(), Value: "", Path: "/", HttpOnly: true,
		Secure: s.cfg.SecureCookies, SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// sameSiteLogin refuses a login form that a browser posted from another
// site (Sec-Fetch-Site, else Origin against Host: net/http's
// CrossOriginProtection), whatever token it carries: another site must
// not log a visitor in, to any account. Clients that send neither
// header (not a browser's cross-site form) pass to the token check.
func (s *Server) sameSiteLogin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.crossOrigin.Check(c.Request()); err != nil {
			s.cfg.Logger.Warn("login refused: posted from another site", "from", c.RealIP(),
				"origin", c.Request().Header.Get("Origin"), "sec_fetch_site", c.Request().Header.Get("Sec-Fetch-Site"))
			return echo.NewHTTPError(http.StatusForbidden, "This login form did not come from this site: open the login page and sign in there.")
		}
		return next(c)
	}
}

func csrfToken(c echo.Context) string {
	t, _ := c.Get(csrfKey).(string)
	return t
}
