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
// its own and sent back with the form: double submit.

const (
	csrfCookie = "gpuportal_csrf"
	csrfField  = "_csrf"
	csrfHeader = "X-CSRF-Token"
	csrfKey    = "csrf"
)

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
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return echo.NewHTTPError(http.StatusForbidden, "The form has expired or did not come from this site: reload the page and try again.")
		}
		return next(c)
	}
}

// expectedCSRF is the token the request's forms carry: its session's, or
// before login the pre-session cookie's, which it sets when missing.
func (s *Server) expectedCSRF(c echo.Context) (string, error) {
	if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" {
		return sessionCSRF(ck.Value), nil
	}
	if ck, err := c.Cookie(csrfCookie); err == nil && len(ck.Value) == 64 {
		return ck.Value, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	c.SetCookie(&http.Cookie{Name: csrfCookie, Value: tok, Path: "/", HttpOnly: true,
		Secure: s.cfg.SecureCookies, SameSite: http.SameSiteStrictMode, MaxAge: 86400})
	return tok, nil
}

func csrfToken(c echo.Context) string {
	t, _ := c.Get(csrfKey).(string)
	return t
}
