package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/identity"
	"github.com/gpuportal/gpuportal/identity/ldapdir"
	"github.com/gpuportal/gpuportal/identity/openid"
	"github.com/gpuportal/gpuportal/models"
)

// oidcCookie carries a sign-in through the OpenID Connect provider from
// its start to the callback: its state, nonce and PKCE verifier. Each
// sign-in begun has a cookie of its own, named after its state
// (oidcCookieName), so that sign-ins begun in two tabs of one browser
// (a session that expired in both) both complete: with one cookie for
// all, the second start overwrote the first's, whose callback was then
// refused as "state does not match".
const oidcCookie = "gpuportal_oidc"

// oidcCookieName is the name of the cookie of the sign-in whose state is
// state: oidcCookie and a digest of the state.
func oidcCookieName(state string) string {
	sum := sha256.Sum256([]byte(state))
	return oidcCookie + "_" + hex.EncodeToString(sum[:8])
}

// oidcFlowTTL is how long a person has at the provider to sign in.
const oidcFlowTTL = 10 * time.Minute

// identitySources builds the sign-in sources of cfg.
func identitySources(cfg identity.Config) (*ldapdir.Directory, *openid.Provider, error) {
	var l *ldapdir.Directory
	var o *openid.Provider
	if cfg.LDAP.Enabled() {
		var err error
		if l, err = ldapdir.New(cfg.LDAP); err != nil {
			return nil, nil, err
		}
	}
	if cfg.OIDC.Enabled() {
		o = openid.New(cfg.OIDC)
	}
	return l, o, nil
}

// signIns is how people sign in on this server (app.SignIns).
func (s *Server) signIns() app.SignIns {
	in := app.SignIns{Config: s.cfg.SignIn}
	if s.ldap != nil {
		in.Directory = s.ldap
	}
	return in
}

// checkPassword is who name and password prove to be
// (app.App.CheckPassword); a refusal of a source's sign-in is an
// *echo.HTTPError with a message for the person.
func (s *Server) checkPassword(c echo.Context, name, password string) (*models.User, error) {
	u, err := s.app.CheckPassword(c.Request().Context(), s.signIns(), name, password, c.RealIP())
	return u, signInRefusal(err)
}

// signIn records a person a source vouched for (app.App.SignIn); a
// refusal is an *echo.HTTPError with a message for the person.
func (s *Server) signIn(c echo.Context, cl identity.Claims) (*models.User, error) {
	u, err := s.app.SignIn(c.Request().Context(), s.signIns(), cl, c.RealIP())
	return u, signInRefusal(err)
}

// signInRefusal is err, with a sign-in's refusal (app.Forbidden) as a
// 403 the login page shows.
func signInRefusal(err error) error {
	if app.KindOf(err) == app.Forbidden {
		return echo.NewHTTPError(http.StatusForbidden, err.Error())
	}
	return err
}

// startSession logs u in on this browser for ttl.
func (s *Server) startSession(c echo.Context, u *models.User, ttl time.Duration) error {
	token, err := s.app.StartSession(c.Request().Context(), u, ttl)
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{
		Name: sessionCookie, Value: token, Path: "/", HttpOnly: true,
		Secure: s.cfg.SecureCookies, SameSite: http.SameSiteLaxMode, MaxAge: int(ttl.Seconds()),
	})
	s.endPreSessionCSRF(c)
	s.cfg.Logger.Info("login", "user", u.Name, "source", u.Source, "from", c.RealIP())
	return nil
}

// sessionTTLOf is how long a session of u lasts (app.SignIns.SessionTTL).
func (s *Server) sessionTTLOf(u *models.User) time.Duration {
	return s.signIns().SessionTTL(u, sessionTTL)
}

// oidcStart sends the browser to the provider to sign in.
func (s *Server) oidcStart(c echo.Context) error {
	if s.oidc == nil {
		return echo.NewHTTPError(http.StatusNotFound, "sign-in through OpenID Connect is not configured")
	}
	next := safeNext(c.QueryParam("next"))
	// The flow's cookie must be set on the host the provider sends the
	// browser back to: a sign-in begun at http://localhost:8080 with the
	// callback registered at http://127.0.0.1:8080 (or a short name and
	// the full one) would reach a callback without it, or with a stale
	// one, and be refused. The browser is sent there first, once (a
	// proxy that rewrites Host is let through the second time).
	if back, err := url.Parse(s.cfg.SignIn.OIDC.RedirectURL); err == nil && c.QueryParam("host") == "" &&
		!strings.EqualFold(c.Request().Host, back.Host) {
		there := url.URL{Scheme: back.Scheme, Host: back.Host, Path: "/login/oidc",
			RawQuery: url.Values{"next": {next}, "host": {"1"}}.Encode()}
		return c.Redirect(http.StatusSeeOther, there.String())
	}
	to, flow, err := s.oidc.Start(c.Request().Context(), next)
	if err != nil {
		s.cfg.Logger.Error("OpenID Connect sign-in unavailable", "err", err)
		return s.render(c, http.StatusServiceUnavailable, s.loginView(c, s.oidc.Name()+" cannot be reached now: try again soon, or ask an admin.", "", next))
	}
	c.SetCookie(&http.Cookie{Name: oidcCookieName(flow.State), Value: openid.EncodeFlow(flow), Path: "/login/oidc", HttpOnly: true,
		Secure: s.cfg.SecureCookies, SameSite: http.SameSiteLaxMode, MaxAge: int(oidcFlowTTL.Seconds())})
	return c.Redirect(http.StatusSeeOther, to)
}

// oidcCallback finishes a sign-in the provider sends back.
func (s *Server) oidcCallback(c echo.Context) error {
	if s.oidc == nil {
		return echo.NewHTTPError(http.StatusNotFound, "sign-in through OpenID Connect is not configured")
	}
	fail := func(code int, msg string) error {
		return s.render(c, code, s.loginView(c, msg, "", ""))
	}
	// The cookie of the sign-in this callback names; it serves once.
	name := oidcCookieName(c.QueryParam("state"))
	ck, err := c.Cookie(name)
	c.SetCookie(&http.Cookie{Name: name, Value: "", Path: "/login/oidc", MaxAge: -1, HttpOnly: true,
		Secure: s.cfg.SecureCookies, SameSite: http.SameSiteLaxMode})
	if err != nil {
		return fail(http.StatusBadRequest, "This sign-in was not started here or took too long: try again.")
	}
	flow, err := openid.DecodeFlow(ck.Value)
	if err != nil {
		return fail(http.StatusBadRequest, "This sign-in was not started here or took too long: try again.")
	}
	cl, err := s.oidc.Finish(c.Request().Context(), flow, c.QueryParams())
	switch {
	case identity.Unavailable(err):
		s.cfg.Logger.Error("OpenID Connect sign-in unavailable", "err", err)
		return fail(http.StatusServiceUnavailable, s.oidc.Name()+" cannot be reached now: try again soon, or ask an admin.")
	case err != nil:
		s.cfg.Logger.Warn("OpenID Connect sign-in refused", "from", c.RealIP(), "err", err)
		return fail(http.StatusBadRequest, "Sign-in with "+s.oidc.Name()+" did not complete: try again.")
	}
	u, err := s.signIn(c, cl)
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return fail(he.Code, fmt.Sprint(he.Message))
	}
	if errors.Is(err, app.ErrDisabled) {
		return fail(http.StatusForbidden, "This account is disabled: ask an admin.")
	}
	if err != nil {
		return err
	}
	if err := s.startSession(c, u, s.sessionTTLOf(u)); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(flow.Next))
}

// providerLogout is where a person of the provider goes after logging
// out here, to end their session there too; empty when there is nowhere.
func (s *Server) providerLogout(ctx context.Context, u *models.User) string {
	if s.oidc == nil || u == nil || u.Source != app.SourceOIDC {
		return ""
	}
	back, err := url.Parse(s.cfg.SignIn.OIDC.RedirectURL)
	if err != nil {
		return ""
	}
	back.Path, back.RawQuery = "/login", ""
	return s.oidc.LogoutURL(ctx, back.String())
}
