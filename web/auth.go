package web

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/identity"
	"github.com/gpuportal/gpuportal/models"
)

const (
	sessionCookie = "gpuportal_session"
	userKey       = "user"
	credKey       = "credential"
)

// currentUser returns the authenticated user, or nil.
func currentUser(c echo.Context) *models.User {
	u, _ := c.Get(userKey).(*models.User)
	return u
}

// credential is what a request proved who it is with: a session cookie
// or an API token, by the hash the store keeps of it (never the secret),
// or the development token. Live connections keep it, to check it again
// (sockets.go).
type credential struct {
	kind credKind
	hash string
}

type credKind int

const (
	credSession credKind = iota + 1
	credToken
	credDevToken
)

func (k credKind) String() string {
	switch k {
	case credSession:
		return "session"
	case credToken:
		return "API token"
	case credDevToken:
		return "development token"
	}
	return "no credential"
}

// currentCredential returns the request's credential.
func currentCredential(c echo.Context) credential {
	cr, _ := c.Get(credKey).(credential)
	return cr
}

// requireAPIUser authenticates a bearer token.
func (s *Server) requireAPIUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		auth := c.Request().Header.Get(echo.HeaderAuthorization)
		token, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || token == "" {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="gpuportal"`)
			return echo.NewHTTPError(http.StatusUnauthorized, "missing bearer token")
		}
		u, cred, err := s.tokenUser(c, token)
		if err != nil {
			return err
		}
		c.Set(userKey, u)
		c.Set(credKey, cred)
		return next(c)
	}
}

func (s *Server) tokenUser(c echo.Context, token string) (*models.User, credential, error) {
	ctx := c.Request().Context()
	cred := credential{kind: credToken, hash: app.HashToken(token)}
	var u *models.User
	var err error
	if s.cfg.DevToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.DevToken)) == 1 {
		cred.kind = credDevToken
		u, err = s.devTokenUser(ctx)
	} else {
		u, err = s.app.TokenUser(ctx, token)
	}
	if app.KindOf(err) == app.NotFound {
		return nil, credential{}, echo.NewHTTPError(http.StatusUnauthorized, err.Error())
	}
	if err != nil {
		return nil, credential{}, err
	}
	return u, cred, nil
}

// devTokenUser is who the development token acts as (app.App.DevTokenUser).
func (s *Server) devTokenUser(ctx context.Context) (*models.User, error) {
	return s.app.DevTokenUser(ctx)
}

// apiCreateToken issues an API token to a user who proves who they are
// with HTTP basic auth.
func (s *Server) apiCreateToken(c echo.Context) error {
	name, password, ok := c.Request().BasicAuth()
	if !ok {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Basic realm="gpuportal"`)
		return echo.NewHTTPError(http.StatusUnauthorized, "use HTTP basic auth with your user name and password")
	}
	// The body first: reading the password may read a form's body.
	var req api.TokenRequest
	if c.Request().ContentLength != 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
		if req.Name != "" {
			if err := app.CheckTokenName(req.Name); err != nil {
				return err
			}
		}
	}
	u, err := s.authenticate(c, name, password)
	if err != nil {
		return err
	}
	tokenName := cmp.Or(req.Name, defaultTokenName(c.Request().UserAgent()))
	out, err := s.app.CreateToken(c.Request().Context(), app.Actor{User: u, From: c.RealIP()}, tokenName, tokenTTL)
	if err != nil {
		return err
	}
	s.cfg.Logger.Info("API token issued", "user", u.Name, "name", tokenName)
	return c.JSON(http.StatusCreated, out)
}

// defaultTokenName names a token asked for without a name: "api" and
// the program that asked, the first word of its User-Agent ("api:
// curl/8.5.0"), so that a list of tokens says which is which.
func defaultTokenName(userAgent string) string {
	prog, _, _ := strings.Cut(strings.TrimSpace(userAgent), " ")
	prog = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, prog)
	if prog == "" {
		return "api"
	}
	if r := []rune(prog); len(r) > 100 {
		prog = string(r[:100])
	}
	return "api: " + prog
}

// authenticate checks a password, within the throttle on failed logins
// (throttle.go). Failures come back as HTTP errors with a message for
// the person.
func (s *Server) authenticate(c echo.Context, name, password string) (*models.User, error) {
	now := s.cfg.Now()
	pair, addr := loginKeys(name, c.RealIP())
	if wait := max(s.logins.wait(now, pair), s.logins.wait(now, addr)); wait > 0 {
		s.cfg.Logger.Warn("login refused: throttled after failures", "user", name, "from", c.RealIP(), "wait", wait)
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds()+0.999)))
		return nil, echo.NewHTTPError(http.StatusTooManyRequests,
			fmt.Sprintf("Too many failed logins from your address; try again in %s.", max(time.Second, wait.Round(time.Second))))
	}
	u, err := s.checkPassword(c, name, password)
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		s.logins.succeed(pair)
		return nil, err
	case identity.Unavailable(err):
		s.cfg.Logger.Error("login: the directory is unavailable", "user", name, "err", err)
		return nil, echo.NewHTTPError(http.StatusServiceUnavailable, "The directory cannot be reached now: try again soon, or ask an admin.")
	case errors.Is(err, app.ErrBadCredentials):
		s.logins.fail(now, pair, pairFree)
		s.logins.fail(now, addr, addrFree)
		s.cfg.Logger.Info("login failed", "user", name, "from", c.RealIP())
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "Wrong user name or password.")
	case errors.Is(err, app.ErrDisabled):
		s.logins.succeed(pair)
		s.cfg.Logger.Info("login refused: account disabled", "user", name, "from", c.RealIP())
		return nil, echo.NewHTTPError(http.StatusForbidden, "This account is disabled: ask an admin.")
	case err != nil:
		return nil, err
	}
	s.logins.succeed(pair)
	return u, nil
}

// loadSessionUser puts the session's user, if any, in the context.
func (s *Server) loadSessionUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" {
			u, err := s.app.SessionUser(c.Request().Context(), ck.Value)
			switch {
			case err == nil:
				c.Set(userKey, u)
				c.Set(credKey, credential{kind: credSession, hash: app.HashToken(ck.Value)})
			case app.KindOf(err) != app.NotFound:
				return err
			}
		}
		return next(c)
	}
}

// requireSessionUser sends visitors who are not logged in to the login page.
func (s *Server) requireSessionUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if currentUser(c) != nil {
			return next(c)
		}
		if c.Request().Header.Get("HX-Request") == "true" {
			c.Response().Header().Set("HX-Redirect", "/login")
			return c.NoContent(http.StatusUnauthorized)
		}
		next := c.Request().URL.RequestURI()
		return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(next))
	}
}

// safeNext keeps a post-login redirect on this site: it returns next if
// it is a path of this site, as a browser would read it, else /jobs.
// Browsers drop tabs and newlines from URLs and read a backslash as a
// slash, so "/\t/evil.example" and "/\\evil.example" lead off site
// ("//evil.example"): a target with either, or with any control
// character, is refused before it is parsed; then only a path with no
// scheme, host or user, not starting with two slashes once decoded, is
// kept, re-encoded from its parts.
func safeNext(next string) string {
	const home = "/jobs"
	if next == "" || len(next) > 2048 || strings.ContainsAny(next, "\\") ||
		strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f || unicode.IsSpace(r) }) {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return home
	}
	out := u.EscapedPath()
	if strings.HasPrefix(out, "//") {
		return home
	}
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out
}

func (s *Server) loginPage(c echo.Context) error {
	if currentUser(c) != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return s.render(c, http.StatusOK, s.loginView(c, "", "", c.QueryParam("next")))
}

func (s *Server) login(c echo.Context) error {
	name, password, next := c.FormValue("username"), c.FormValue("password"), c.FormValue("next")
	u, err := s.authenticate(c, name, password)
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return s.render(c, he.Code, s.loginView(c, he.Message.(string), name, next))
	}
	if err != nil {
		return err
	}
	if err := s.startSession(c, u, s.sessionTTLOf(u)); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

func (s *Server) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		// The session's live connections end.
		if err := s.app.EndSession(c.Request().Context(), ck.Value); err != nil {
			return err
		}
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true})
	if to := s.providerLogout(c.Request().Context(), currentUser(c)); to != "" {
		// RP-initiated logout: the provider ends its session too, then
		// sends the browser back to the login page.
		return c.Redirect(http.StatusSeeOther, to)
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}

// canSee reports whether u may read jobs of team.
func canSee(u *models.User, team string) bool { return app.CanSee(u, team) }

// canCancel reports whether u may cancel j: its owner, its team's lead, an admin.
func canCancel(u *models.User, j *models.Job) bool { return app.CanCancel(u, j) }
