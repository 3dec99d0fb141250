package web

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gpuportal/gpuportal/models"
)

const (
	sessionCookie = "gpuportal_session"
	userKey       = "user"
)

// currentUser returns the authenticated user, or nil.
func currentUser(c echo.Context) *models.User {
	u, _ := c.Get(userKey).(*models.User)
	return u
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
		u, err := s.tokenUser(c, token)
		if err != nil {
			return err
		}
		c.Set(userKey, u)
		return next(c)
	}
}

func (s *Server) tokenUser(c echo.Context, token string) (*models.User, error) {
	if s.cfg.DevToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.DevToken)) == 1 {
		// The development token acts as the demo admin.
		u, err := s.cfg.Store.UserByName(c.Request().Context(), "admin")
		if err != nil || u.Role != models.RoleAdmin {
			return nil, echo.NewHTTPError(http.StatusUnauthorized, "development token: no admin user named admin")
		}
		return u, nil
	}
	u, err := s.cfg.Store.TokenUser(c.Request().Context(), token, s.cfg.Now())
	if errors.Is(err, models.ErrNotFound) {
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "invalid or expired token")
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

// apiCreateToken issues an API token to a user who proves who they are
// with HTTP basic auth.
func (s *Server) apiCreateToken(c echo.Context) error {
	name, password, ok := c.Request().BasicAuth()
	if !ok {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Basic realm="gpuportal"`)
		return echo.NewHTTPError(http.StatusUnauthorized, "use HTTP basic auth with your user name and password")
	}
	u, err := s.authenticate(c, name, password)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	token, err := s.cfg.Store.CreateAPIToken(c.Request().Context(), u.ID, "api", now, tokenTTL)
	if err != nil {
		return err
	}
	s.cfg.Logger.Info("API token issued", "user", u.Name)
	return c.JSON(http.StatusCreated, map[string]any{"token": token, "expires_at": now.Add(tokenTTL)})
}

// authenticate checks a password, within the limit on failed logins.
// Failures come back as HTTP errors with a message for the person.
func (s *Server) authenticate(c echo.Context, name, password string) (*models.User, error) {
	now := s.cfg.Now()
	keys := []string{"ip:" + c.RealIP(), "user:" + strings.ToLower(name)}
	if blocked, wait := s.logins.Blocked(now, keys...); blocked {
		s.cfg.Logger.Warn("login refused: too many failures", "user", name, "from", c.RealIP())
		return nil, echo.NewHTTPError(http.StatusTooManyRequests,
			fmt.Sprintf("Too many failed logins; try again in %s.", wait.Round(time.Second)))
	}
	u, err := s.cfg.Store.Authenticate(c.Request().Context(), name, password)
	if errors.Is(err, models.ErrBadCredentials) {
		s.logins.Fail(now, keys...)
		s.cfg.Logger.Info("login failed", "user", name, "from", c.RealIP())
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "Wrong user name or password.")
	}
	return u, err
}

// loadSessionUser puts the session's user, if any, in the context.
func (s *Server) loadSessionUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if ck, err := c.Cookie(sessionCookie); err == nil && ck.Value != "" {
			u, err := s.cfg.Store.SessionUser(c.Request().Context(), ck.Value, s.cfg.Now())
			switch {
			case err == nil:
				c.Set(userKey, u)
			case !errors.Is(err, models.ErrNotFound):
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

func csrfToken(c echo.Context) string {
	t, _ := c.Get(middleware.DefaultCSRFConfig.ContextKey).(string)
	return t
}

// safeNext keeps a post-login redirect on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/jobs"
	}
	return next
}

func (s *Server) loginPage(c echo.Context) error {
	if currentUser(c) != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return s.render(c, http.StatusOK, loginView(c, "", "", c.QueryParam("next")))
}

func (s *Server) login(c echo.Context) error {
	name, password, next := c.FormValue("username"), c.FormValue("password"), c.FormValue("next")
	ctx := c.Request().Context()
	u, err := s.authenticate(c, name, password)
	var he *echo.HTTPError
	if errors.As(err, &he) {
		return s.render(c, he.Code, loginView(c, he.Message.(string), name, next))
	}
	if err != nil {
		return err
	}
	token, err := s.cfg.Store.CreateSession(ctx, u.ID, s.cfg.Now(), sessionTTL)
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{
		Name: sessionCookie, Value: token, Path: "/", HttpOnly: true,
		Secure: s.cfg.SecureCookies, SameSite: http.SameSiteLaxMode, MaxAge: int(sessionTTL.Seconds()),
	})
	s.cfg.Logger.Info("login", "user", u.Name, "from", c.RealIP())
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

func (s *Server) logout(c echo.Context) error {
	if ck, err := c.Cookie(sessionCookie); err == nil {
		if err := s.cfg.Store.DeleteSession(c.Request().Context(), ck.Value); err != nil {
			return err
		}
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true})
	return c.Redirect(http.StatusSeeOther, "/login")
}

// canSee reports whether u may read jobs of team.
func canSee(u *models.User, team string) bool {
	return u.Role == models.RoleAdmin || u.Team == team
}

// canCancel reports whether u may cancel j: its owner, its team's lead, an admin.
func canCancel(u *models.User, j *models.Job) bool {
	return u.Role == models.RoleAdmin || u.Name == j.User || (u.Role == models.RoleLead && u.Team == j.Team)
}
