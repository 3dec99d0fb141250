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

	"github.com/gpuportal/gpuportal/identity"
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
func identitySources(cfg identity.Config) (*identity.LDAP, *identity.OIDC, error) {
	var l *identity.LDAP
	var o *identity.OIDC
	if cfg.LDAP.Enabled() {
		var err error
		if l, err = identity.NewLDAP(cfg.LDAP); err != nil {
			return nil, nil, err
		}
	}
	if cfg.OIDC.Enabled() {
		o = identity.NewOIDC(cfg.OIDC)
	}
	return l, o, nil
}

// checkPassword is who name and password prove to be: a local account
// checked here, or a person of the LDAP directory, whose account is made
// or brought up to date with their groups (signIn). A local account
// keeps its password while LDAP is on (break-glass admins); with
// --auth-link-local, a local account whose password does not match may
// sign in with its directory password instead, which links it.
func (s *Server) checkPassword(c echo.Context, name, password string) (*models.User, error) {
	ctx := c.Request().Context()
	if s.ldap == nil {
		return s.cfg.Store.Authenticate(ctx, name, password)
	}
	u, err := s.cfg.Store.UserByName(ctx, name)
	switch {
	case err != nil && !errors.Is(err, models.ErrNotFound):
		return nil, err
	case err == nil && u.Source == models.SourceLocal:
		lu, err := s.cfg.Store.Authenticate(ctx, name, password)
		if !errors.Is(err, models.ErrBadCredentials) || !s.cfg.SignIn.LinkLocalAccounts {
			return lu, err
		}
	case err == nil && u.Source == models.SourceOIDC:
		s.cfg.Logger.Info("password login refused: the account signs in through OpenID Connect", "user", name)
		return nil, models.ErrBadCredentials
	}
	cl, err := s.ldap.Authenticate(ctx, name, password)
	if errors.Is(err, identity.ErrBadCredentials) {
		return nil, models.ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	return s.signIn(c, cl)
}

// signIn records a person a source vouched for: their role and team from
// their groups, the account made on first sign-in, changes audited and
// live connections checked again at once, so that a team lost at the
// source is lost on every open page.
func (s *Server) signIn(c echo.Context, cl identity.Claims) (*models.User, error) {
	ctx := c.Request().Context()
	role, team, err := s.cfg.SignIn.Mapping.Resolve(cl.Groups)
	if err != nil {
		s.cfg.Logger.Info("sign-in refused: no team", "user", cl.Name, "source", cl.Source, "groups", cl.Groups)
		return nil, echo.NewHTTPError(http.StatusForbidden,
			"None of your groups gives you a team in the portal: ask an admin to map one of them.")
	}
	in, err := s.cfg.Store.SyncExternalUser(ctx, models.ExternalUser{Source: cl.Source, Subject: cl.Subject,
		Name: cl.Name, UnixName: cl.UnixName, Role: models.Role(role), Team: team}, s.cfg.SignIn.LinkLocalAccounts, s.cfg.Now())
	switch {
	case errors.Is(err, models.ErrOtherSource):
		s.cfg.Logger.Warn("sign-in refused: the name belongs to another account", "user", cl.Name, "source", cl.Source, "err", err)
		return nil, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf(
			"An account named %s already exists here and signs in another way: ask an admin.", cl.Name))
	case errors.Is(err, models.ErrInvalid):
		s.cfg.Logger.Warn("sign-in refused: the source's account does not fit", "user", cl.Name, "source", cl.Source, "err", err)
		return nil, echo.NewHTTPError(http.StatusForbidden, "Your account at the identity source does not fit the portal: "+
			strings.TrimSuffix(err.Error(), ": "+models.ErrInvalid.Error())+". Ask an admin.")
	case err != nil:
		return nil, err
	}
	by := actor{user: &models.User{Name: "sign-in:" + cl.Source}, from: c.RealIP()}
	if in.Created {
		s.cfg.Logger.Info("account made at first sign-in", "user", cl.Name, "source", cl.Source, "role", role, "team", team)
		if err := s.auditBy(ctx, by, "user.create", cl.Name, fmt.Sprintf("from %s: role %s team %s", cl.Source, role, team)); err != nil {
			return nil, err
		}
	}
	if err := s.recordChanges(ctx, by, in); err != nil {
		return nil, err
	}
	return in.User, nil
}

// recordChanges logs and audits what a sign-in or a directory sync
// changed of an account, and has live connections checked again at once,
// so that they lose the topics of a team the account left.
func (s *Server) recordChanges(ctx context.Context, by actor, in models.SignIn) error {
	if len(in.Changed) == 0 {
		return nil
	}
	s.cfg.Logger.Info("account changed from its source", "user", in.User.Name, "source", in.User.Source, "by", by.user.Name, "changes", in.Changed)
	if err := s.auditBy(ctx, by, "user.sync", in.User.Name, strings.Join(in.Changed, "; ")); err != nil {
		return err
	}
	s.hub.poke()
	return nil
}

// startSession logs u in on this browser for ttl.
func (s *Server) startSession(c echo.Context, u *models.User, ttl time.Duration) error {
	token, err := s.cfg.Store.CreateSession(c.Request().Context(), u.ID, s.cfg.Now(), ttl)
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

// sessionTTLOf is how long a session of u lasts: a person from a source
// signs in again sooner, so that their groups are read again.
func (s *Server) sessionTTLOf(u *models.User) time.Duration {
	if u.Source != models.SourceLocal && s.cfg.SignIn.SessionTTL > 0 {
		return min(sessionTTL, time.Duration(s.cfg.SignIn.SessionTTL))
	}
	return sessionTTL
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
	c.SetCookie(&http.Cookie{Name: oidcCookieName(flow.State), Value: identity.EncodeFlow(flow), Path: "/login/oidc", HttpOnly: true,
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
	flow, err := identity.DecodeFlow(ck.Value)
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
	if errors.Is(err, models.ErrDisabled) {
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
	if s.oidc == nil || u == nil || u.Source != models.SourceOIDC {
		return ""
	}
	back, err := url.Parse(s.cfg.SignIn.OIDC.RedirectURL)
	if err != nil {
		return ""
	}
	back.Path, back.RawQuery = "/login", ""
	return s.oidc.LogoutURL(ctx, back.String())
}
