package web

import (
	"cmp"
	"context"
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
		v.Users = append(v.Users, templates.UserRow{Name: u.Name, Role: string(u.Role), Team: u.Team,
			UnixName: cmp.Or(u.UnixName, u.Name), Source: cmp.Or(u.Source, models.SourceLocal)})
	}
	if v.Accounts, err = s.accountsView(c, us); err != nil {
		return v, err
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
	ts, err := s.cfg.Store.Teams(c.Request().Context())
	if err != nil {
		return err
	}
	p.Warning = guaranteeWarning(ts, s.clusterGPUs())
	return s.render(c, status, templates.AdminPage(p, v))
}

// adminAction applies one form of the admin page: it returns a notice
// for the page, or an *echo.HTTPError with what was wrong, shown on the
// page with its status (400 naming the field, 404, 409).
func (s *Server) adminAction(c echo.Context) error {
	action := c.Param("action")
	notice, err := s.applyAdminAction(c, action)
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code >= 400 && he.Code < 500 && he.Code != http.StatusNotFound {
		msg, _ := he.Message.(string)
		return s.renderAdmin(c, he.Code, msg, "")
	}
	if err != nil {
		return err
	}
	return s.renderAdmin(c, http.StatusOK, "", notice)
}

func badRequest(format string, args ...any) error {
	return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(format, args...))
}

// Bounds of the admin forms' fields.
const (
	minPassword  = 8
	maxPassword  = 72 // bcrypt reads no further: a longer one would be cut
	maxGuarantee = 1_000_000
)

// checkPassword says what is wrong with a new password, naming the field.
func checkPassword(pw string) error {
	switch {
	case len(pw) < minPassword:
		return badRequest("password: must be at least %d characters", minPassword)
	case len(pw) > maxPassword:
		return badRequest("password: must be at most %d bytes (bcrypt reads no further)", maxPassword)
	}
	return nil
}

// checkRoleTeam says what is wrong with a role and team for a user,
// naming the field: the team must exist, and only admins may have none.
func (s *Server) checkRoleTeam(ctx context.Context, role models.Role, team string) error {
	if !role.Valid() {
		return badRequest("role: must be researcher, lead or admin, not %q", role)
	}
	if team == "" {
		if role != models.RoleAdmin {
			return badRequest("team: a %s needs a team", role)
		}
		return nil
	}
	teams, err := s.teamNames(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(teams, team) {
		return badRequest("team: no team %q", team)
	}
	return nil
}

// applyAdminAction validates the form of action as the API validates its
// requests: every field as given, never trimmed or clipped; a field at
// fault is a 400 naming it.
func (s *Server) applyAdminAction(c echo.Context, action string) (string, error) {
	ctx := c.Request().Context()
	name := c.FormValue("name")
	if err := models.CheckName(name); err != nil {
		return "", badRequest("name: %s", err)
	}
	switch action {
	case "create-team":
		g, err := strconv.Atoi(c.FormValue("guarantee"))
		if err != nil || g < 0 || g > maxGuarantee {
			return "", badRequest("guarantee: must be a whole number of GPUs from 0 to %d", maxGuarantee)
		}
		if _, err := s.cfg.Store.CreateTeam(ctx, name, g); errors.Is(err, models.ErrExists) {
			return "", badRequest("name: team %s already exists", name)
		} else if err != nil {
			return "", err
		}
		return "Team " + name + " created.", s.audit(c, "team.create", name, fmt.Sprintf("guarantee %d", g))
	case "create-user":
		role, team, pw := models.Role(c.FormValue("role")), c.FormValue("team"), c.FormValue("password")
		if err := s.checkRoleTeam(ctx, role, team); err != nil {
			return "", err
		}
		if err := checkPassword(pw); err != nil {
			return "", err
		}
		if _, err := s.cfg.Store.CreateUser(ctx, name, pw, role, team); errors.Is(err, models.ErrExists) {
			return "", badRequest("name: user %s already exists", name)
		} else if err != nil {
			return "", err
		}
		return "User " + name + " created.", s.audit(c, "user.create", name, fmt.Sprintf("role %s team %s", role, team))
	case "set-role":
		if name == currentUser(c).Name {
			return "", badRequest("name: you may not change your own role; ask another admin")
		}
		role, team := models.Role(c.FormValue("role")), c.FormValue("team")
		if err := s.checkRoleTeam(ctx, role, team); err != nil {
			return "", err
		}
		if err := s.cfg.Store.SetRole(ctx, name, role, team); errors.Is(err, models.ErrNotFound) {
			return "", badRequest("name: no user %s", name)
		} else if err != nil {
			return "", err
		}
		s.hub.poke() // live connections lose the topics of the old team at once
		return fmt.Sprintf("%s is now %s of %q.", name, role, team), s.audit(c, "user.role", name, fmt.Sprintf("role %s team %s", role, team))
	case "reset-password":
		pw := c.FormValue("password")
		if err := checkPassword(pw); err != nil {
			return "", err
		}
		if err := s.cfg.Store.SetPassword(ctx, name, pw); errors.Is(err, models.ErrNotFound) {
			return "", badRequest("name: no user %s", name)
		} else if errors.Is(err, models.ErrInvalid) {
			return "", badRequest("name: %s signs in through the lab's directory or identity provider, which keeps the password", name)
		} else if err != nil {
			return "", err
		}
		s.hub.poke()
		return "Password of " + name + " reset: their sessions, API tokens and live connections have ended.", s.audit(c, "user.password", name, "sessions and tokens ended")
	case "disable-user", "enable-user", "delete-user":
		act := map[string]accountAction{"disable-user": disableAccount, "enable-user": enableAccount, "delete-user": deleteAccount}[action]
		out, err := s.changeAccount(ctx, actorOf(c), name, act)
		if err != nil {
			return "", asFormError(err)
		}
		switch act {
		case disableAccount:
			return fmt.Sprintf("%s is disabled: their sessions, tokens and live connections have ended; %d waiting jobs are held.", name, out.HeldJobs), nil
		case enableAccount:
			return fmt.Sprintf("%s is enabled again; %d held jobs were released.", name, out.ReleasedJobs), nil
		}
		return fmt.Sprintf("%s is deleted; %d waiting jobs are held until an admin cancels them.", name, out.HeldJobs), nil
	case "set-unix-name":
		return s.unixNameForm(c, name)
	case "revoke-token":
		id, err := strconv.ParseInt(c.FormValue("id"), 10, 64)
		if err != nil || id < 1 {
			return "", badRequest("id: must be a token's number")
		}
		if err := s.revokeUserToken(ctx, actorOf(c), name, id); err != nil {
			return "", asFormError(err)
		}
		return fmt.Sprintf("Token %d of %s revoked.", id, name), nil
	}
	return "", echo.NewHTTPError(http.StatusNotFound, "unknown admin action "+action)
}

// asFormError turns a service's 404 about the named user into a 400
// naming the field, as a form shows it.
func asFormError(err error) error {
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusNotFound {
		return badRequest("name: %v", he.Message)
	}
	return err
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
	name := c.FormValue("name")
	days, err := strconv.Atoi(c.FormValue("days"))
	if name == "" || len(name) > 128 || strings.TrimSpace(name) != name {
		return s.renderTokens(c, http.StatusBadRequest, "name: is required: 1 to 128 characters, not beginning or ending with spaces", "")
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
	s.hub.poke() // connections opened with it end
	if err := s.audit(c, "token.revoke", u.Name, strconv.FormatInt(id, 10)); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/tokens")
}
