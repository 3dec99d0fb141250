package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// audit records an action of the current user.
func (s *Server) audit(c echo.Context, action, target, detail string) error {
	return s.auditBy(c.Request().Context(), actorOf(c), action, target, detail)
}

// requireAdmin lets only admins through.
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if u := currentUser(c); u == nil || u.Role != models.RoleAdmin {
			return echo.NewHTTPError(http.StatusForbidden, "only admins may do this")
		}
		return next(c)
	}
}

func (s *Server) adminView(c echo.Context) (templates.Admin, error) {
	ctx := c.Request().Context()
	var v templates.Admin
	us, err := s.cfg.Store.Users(ctx)
	if err != nil {
		return v, err
	}
	for _, u := range us {
		v.Users = append(v.Users, templates.UserRow{Name: u.Name, Role: string(u.Role), Team: u.Team})
	}
	ts, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		return v, err
	}
	for _, t := range ts {
		v.Teams = append(v.Teams, templates.TeamRow{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs})
	}
	es, err := s.cfg.Store.AuditLog(ctx, 100)
	if err != nil {
		return v, err
	}
	for _, e := range es {
		v.Audit = append(v.Audit, templates.AuditRow{
			At: e.At.Local().Format(timeLayout), Actor: e.Actor, Action: e.Action, Target: e.Target, Detail: e.Detail, From: e.From,
		})
	}
	return v, nil
}

func (s *Server) adminPage(c echo.Context) error {
	return s.renderAdmin(c, http.StatusOK, "", "")
}

func (s *Server) renderAdmin(c echo.Context, status int, flash, notice string) error {
	v, err := s.adminView(c)
	if err != nil {
		return err
	}
	p := page(c, "Admin", "admin")
	p.Flash, p.Notice = flash, notice
	return s.render(c, status, templates.AdminPage(p, v))
}

// adminAction applies one form of the admin page: it returns a notice
// for the page, or an *echo.HTTPError with what was wrong.
func (s *Server) adminAction(c echo.Context) error {
	action := c.Param("action")
	notice, err := s.applyAdminAction(c, action)
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusBadRequest {
		return s.renderAdmin(c, http.StatusBadRequest, he.Message.(string), "")
	}
	if err != nil {
		return err
	}
	return s.renderAdmin(c, http.StatusOK, "", notice)
}

func badRequest(format string, args ...any) error {
	return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(format, args...))
}

func (s *Server) applyAdminAction(c echo.Context, action string) (string, error) {
	ctx := c.Request().Context()
	name := strings.TrimSpace(c.FormValue("name"))
	if name == "" {
		return "", badRequest("name: is required")
	}
	switch action {
	case "create-team":
		g, err := strconv.Atoi(c.FormValue("guarantee"))
		if err != nil || g < 0 {
			return "", badRequest("guarantee: must be a whole number of GPUs, 0 or more")
		}
		if _, err := s.cfg.Store.CreateTeam(ctx, name, g); errors.Is(err, models.ErrExists) {
			return "", badRequest("name: team %s already exists", name)
		} else if err != nil {
			return "", err
		}
		return "Team " + name + " created.", s.audit(c, "team.create", name, fmt.Sprintf("guarantee %d", g))
	case "create-user":
		role, team, pw := models.Role(c.FormValue("role")), c.FormValue("team"), c.FormValue("password")
		if !role.Valid() {
			return "", badRequest("role: must be researcher, lead or admin")
		}
		if role != models.RoleAdmin && team == "" {
			return "", badRequest("team: a %s needs a team", role)
		}
		if len(pw) < 8 {
			return "", badRequest("password: must be at least 8 characters")
		}
		if _, err := s.cfg.Store.CreateUser(ctx, name, pw, role, team); errors.Is(err, models.ErrExists) {
			return "", badRequest("name: user %s already exists", name)
		} else if err != nil {
			return "", err
		}
		return "User " + name + " created.", s.audit(c, "user.create", name, fmt.Sprintf("role %s team %s", role, team))
	case "set-role":
		role, team := models.Role(c.FormValue("role")), c.FormValue("team")
		if err := s.cfg.Store.SetRole(ctx, name, role, team); errors.Is(err, models.ErrNotFound) {
			return "", badRequest("%s", err.Error())
		} else if err != nil {
			return "", badRequest("role: %s", err.Error())
		}
		return fmt.Sprintf("%s is now %s of %q.", name, role, team), s.audit(c, "user.role", name, fmt.Sprintf("role %s team %s", role, team))
	case "reset-password":
		pw := c.FormValue("password")
		if len(pw) < 8 {
			return "", badRequest("password: must be at least 8 characters")
		}
		if err := s.cfg.Store.SetPassword(ctx, name, pw); errors.Is(err, models.ErrNotFound) {
			return "", badRequest("name: no user %s", name)
		} else if err != nil {
			return "", err
		}
		return "Password of " + name + " reset.", s.audit(c, "user.password", name, "")
	}
	return "", echo.NewHTTPError(http.StatusNotFound, "unknown admin action "+action)
}

// tokensPage lists the user's API tokens and lets them make and revoke one.
func (s *Server) tokensPage(c echo.Context) error {
	return s.renderTokens(c, http.StatusOK, "", "")
}

func (s *Server) renderTokens(c echo.Context, status int, flash, newToken string) error {
	u := currentUser(c)
	ts, err := s.cfg.Store.APITokens(c.Request().Context(), u.ID, s.cfg.Now())
	if err != nil {
		return err
	}
	v := templates.Tokens{New: newToken}
	for _, t := range ts {
		v.Tokens = append(v.Tokens, templates.TokenRow{ID: t.ID, Name: t.Name,
			Created: t.CreatedAt.Local().Format(timeLayout), Expires: t.ExpiresAt.Local().Format(timeLayout)})
	}
	p := page(c, "API tokens", "tokens")
	p.Flash = flash
	return s.render(c, status, templates.TokensPage(p, v))
}

func (s *Server) createTokenForm(c echo.Context) error {
	name := strings.TrimSpace(c.FormValue("name"))
	days, err := strconv.Atoi(c.FormValue("days"))
	if name == "" || len(name) > 128 {
		return s.renderTokens(c, http.StatusBadRequest, "name: is required (at most 128 characters)", "")
	}
	if err != nil || days < 1 || days > 365 {
		return s.renderTokens(c, http.StatusBadRequest, "days: must be from 1 to 365", "")
	}
	u := currentUser(c)
	tok, err := s.cfg.Store.CreateAPIToken(c.Request().Context(), u.ID, name, s.cfg.Now(), time.Duration(days)*24*time.Hour)
	if err != nil {
		return err
	}
	if err := s.audit(c, "token.create", u.Name, name); err != nil {
		return err
	}
	return s.renderTokens(c, http.StatusOK, "", tok)
}

func (s *Server) revokeTokenForm(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "id: must be a number")
	}
	u := currentUser(c)
	err = s.cfg.Store.RevokeAPIToken(c.Request().Context(), u.ID, id)
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("you have no token %d", id))
	}
	if err != nil {
		return err
	}
	if err := s.audit(c, "token.revoke", u.Name, strconv.FormatInt(id, 10)); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/tokens")
}
