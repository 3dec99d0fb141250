package web

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// audit records an action of the current user.
func (s *Server) audit(c echo.Context, action, target, detail string) error {
	u := currentUser(c)
	return s.cfg.Store.Audit(c.Request().Context(), models.AuditEntry{
		At: s.cfg.Now(), Actor: u.Name, Action: action, Target: target, Detail: detail, From: c.RealIP(),
	})
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

// maxAccountName is the longest user or team name the store keeps.
const maxAccountName = 64

// accountName reads the form's name field: required, at most
// maxAccountName characters.
func accountName(c echo.Context) (string, error) {
	name := strings.TrimSpace(c.FormValue("name"))
	if name == "" {
		return "", badRequest("name: is required")
	}
	if len(name) > maxAccountName {
		return "", badRequest("name: at most %d characters", maxAccountName)
	}
	return name, nil
}

// roleAndTeam reads the form's role and team: a known role, and a team
// that exists, which every role but admin needs.
func (s *Server) roleAndTeam(c echo.Context) (models.Role, string, error) {
	role, team := models.Role(c.FormValue("role")), strings.TrimSpace(c.FormValue("team"))
	if !role.Valid() {
		return "", "", badRequest("role: must be researcher, lead or admin")
	}
	if team == "" {
		if role != models.RoleAdmin {
			return "", "", badRequest("team: a %s needs a team", role)
		}
		return role, "", nil
	}
	if _, err := s.cfg.Store.Team(c.Request().Context(), team); errors.Is(err, models.ErrNotFound) {
		return "", "", badRequest("team: no team %s", team)
	} else if err != nil {
		return "", "", fmt.Errorf("look up team %s: %w", team, err)
	}
	return role, team, nil
}

// minPassword is the shortest password an admin may give.
const minPassword = 8

// adminActions are the forms of the admin page.
var adminActions = []string{"create-team", "create-user", "set-role", "reset-password"}

func (s *Server) applyAdminAction(c echo.Context, action string) (string, error) {
	if !slices.Contains(adminActions, action) {
		return "", echo.NewHTTPError(http.StatusNotFound, "unknown admin action "+action)
	}
	ctx := c.Request().Context()
	name, err := accountName(c)
	if err != nil {
		return "", err
	}
	switch action {
	case "create-team":
		g, err := strconv.Atoi(strings.TrimSpace(c.FormValue("guarantee")))
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
		role, team, err := s.roleAndTeam(c)
		if err != nil {
			return "", err
		}
		pw := c.FormValue("password")
		if len(pw) < minPassword {
			return "", badRequest("password: must be at least %d characters", minPassword)
		}
		if _, err := s.cfg.Store.CreateUser(ctx, name, pw, role, team); errors.Is(err, models.ErrExists) {
			return "", badRequest("name: user %s already exists", name)
		} else if err != nil {
			return "", err
		}
		return fmt.Sprintf("User %s created: %s.", name, roleOf(role, team)),
			s.audit(c, "user.create", name, fmt.Sprintf("role %s team %s", role, team))
	case "set-role":
		if name == currentUser(c).Name {
			return "", badRequest("name: you may not change your own role; ask another admin")
		}
		role, team, err := s.roleAndTeam(c)
		if err != nil {
			return "", err
		}
		if err := s.cfg.Store.SetRole(ctx, name, role, team); errors.Is(err, models.ErrNotFound) {
			return "", badRequest("name: no user %s", name)
		} else if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s is now %s.", name, roleOf(role, team)),
			s.audit(c, "user.role", name, fmt.Sprintf("role %s team %s", role, team))
	case "reset-password":
		pw := c.FormValue("password")
		if len(pw) < minPassword {
			return "", badRequest("password: must be at least %d characters", minPassword)
		}
		if err := s.cfg.Store.SetPassword(ctx, name, pw); errors.Is(err, models.ErrNotFound) {
			return "", badRequest("name: no user %s", name)
		} else if err != nil {
			return "", err
		}
		return "Password of " + name + " reset.", s.audit(c, "user.password", name, "")
	}
	return "", fmt.Errorf("admin action %s: no handler", action)
}

// roleOf says a role in words: "lead of vision", "admin".
func roleOf(role models.Role, team string) string {
	if team == "" {
		return string(role)
	}
	return fmt.Sprintf("%s of %s", role, team)
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
