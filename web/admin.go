package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/templates"
)

// requireAdmin lets only admins through.
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc { return requireAdminTo("do this")(next) }

// requireAdminTo lets only admins through, refusing others naming what
// only admins may do (app.AdminsSetShare, ...).
func requireAdminTo(what string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if u := currentUser(c); u == nil || !app.IsAdmin(u) {
				return echo.NewHTTPError(http.StatusForbidden, "only admins may "+what)
			}
			return next(c)
		}
	}
}

func (s *Server) adminView(c echo.Context) (templates.Admin, []api.TeamShare, error) {
	var v templates.Admin
	o, err := s.app.AdminOverview(c.Request().Context(), appActor(c), 100)
	if err != nil {
		return v, nil, err
	}
	v.Accounts = accountsView(c, o)
	for _, t := range o.Teams {
		v.Teams = append(v.Teams, templates.TeamRow{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs})
	}
	for _, e := range o.Audit {
		v.Audit = append(v.Audit, templates.AuditRow{
			At: e.At.Local().Format(timeLayout), Actor: e.Actor, Action: e.Action, Target: e.Target, Detail: e.Detail, From: e.From,
		})
	}
	return v, o.Teams, nil
}

func (s *Server) adminPage(c echo.Context) error {
	return s.renderAdmin(c, http.StatusOK, "", "")
}

func (s *Server) renderAdmin(c echo.Context, status int, flash, notice string) error {
	v, teams, err := s.adminView(c)
	if err != nil {
		return err
	}
	p := page(c, "Admin", "admin")
	p.Flash, p.Notice = flash, notice
	p.Warning = guaranteeWarning(teams, s.app.ClusterGPUs())
	return s.render(c, status, templates.AdminPage(p, v))
}

// adminAction applies one form of the admin page: it returns a notice
// for the page, or what was wrong, shown on the page with its status (400
// naming the field, 403, 409).
func (s *Server) adminAction(c echo.Context) error {
	action := c.Param("action")
	notice, err := s.applyAdminAction(c, action)
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code >= 400 && he.Code < 500 && he.Code != http.StatusNotFound {
		msg, _ := he.Message.(string)
		return s.renderAdmin(c, he.Code, msg, "")
	}
	var ae *app.Error
	if errors.As(err, &ae) && ae.Kind != app.Unavailable {
		if ae.Kind == app.NotFound {
			// The user the form names: its field is at fault.
			return s.renderAdmin(c, http.StatusBadRequest, "name: "+ae.Msg, "")
		}
		return s.renderAdmin(c, appStatus(ae.Kind), ae.Msg, "")
	}
	if err != nil {
		return err
	}
	return s.renderAdmin(c, http.StatusOK, "", notice)
}

func badRequest(format string, args ...any) error {
	return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(format, args...))
}

// applyAdminAction validates the form of action as the API validates its
// requests: every field as given, never trimmed or clipped; a field at
// fault is a 400 naming it.
func (s *Server) applyAdminAction(c echo.Context, action string) (string, error) {
	if !isAdminAction(action) {
		// Before any field: a form posted to no action is not found,
		// whatever it holds.
		return "", echo.NewHTTPError(http.StatusNotFound, "unknown admin action "+action)
	}
	ctx := c.Request().Context()
	name := c.FormValue("name")
	if err := app.CheckName(name); err != nil {
		return "", err
	}
	a := appActor(c)
	switch action {
	case "create-team":
		g, err := strconv.Atoi(c.FormValue("guarantee"))
		if err != nil {
			return "", badRequest("guarantee: must be a whole number of GPUs from 0 to %d", app.MaxGuarantee)
		}
		return "Team " + name + " created.", s.app.CreateTeam(ctx, a, api.CreateTeam{Name: name, GuaranteeGPUs: g})
	case "create-user":
		req := api.CreateUser{Name: name, Role: c.FormValue("role"), Team: c.FormValue("team"), Password: c.FormValue("password")}
		return "User " + name + " created.", s.app.CreateUser(ctx, a, req)
	case "set-role":
		req := api.SetRole{Role: c.FormValue("role"), Team: c.FormValue("team")}
		return fmt.Sprintf("%s is now %s of %q.", name, req.Role, req.Team), s.app.SetRole(ctx, a, name, req)
	case "reset-password":
		return "Password of " + name + " reset: their sessions, API tokens and live connections have ended.",
			s.app.ResetPassword(ctx, a, name, api.SetPassword{Password: c.FormValue("password")})
	case "disable-user", "enable-user", "delete-user":
		act := map[string]app.AccountAction{"disable-user": app.DisableAccount, "enable-user": app.EnableAccount, "delete-user": app.DeleteAccount}[action]
		out, err := s.app.ChangeAccount(ctx, a, name, act)
		if err != nil {
			return "", err
		}
		switch act {
		case app.DisableAccount:
			return fmt.Sprintf("%s is disabled: their sessions, tokens and live connections have ended; %d waiting jobs are held.", name, out.HeldJobs), nil
		case app.EnableAccount:
			return fmt.Sprintf("%s is enabled again; %d held jobs were released.", name, out.ReleasedJobs), nil
		}
		return fmt.Sprintf("%s is deleted; %d waiting jobs are held until an admin cancels them.", name, out.HeldJobs), nil
	case "set-unix-name":
		u, err := s.app.SetUnixName(ctx, a, name, api.SetUnixName{UnixName: c.FormValue("unix_name")})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Jobs of %s run as the Unix account %s.", u.Name, u.UnixName), nil
	case "revoke-token":
		id, err := strconv.ParseInt(c.FormValue("id"), 10, 64)
		if err != nil || id < 1 {
			return "", badRequest("id: must be a token's number")
		}
		if err := s.app.RevokeUserToken(ctx, a, name, id); err != nil {
			return "", err
		}
		return fmt.Sprintf("Token %d of %s revoked.", id, name), nil
	}
	return "", fmt.Errorf("admin action %s is listed but not applied", action)
}

// isAdminAction tells whether applyAdminAction applies action.
func isAdminAction(action string) bool {
	switch action {
	case "create-team", "create-user", "set-role", "reset-password",
		"disable-user", "enable-user", "delete-user", "set-unix-name", "revoke-token":
		return true
	}
	return false
}

// tokensPage lists the user's API tokens and lets them make and revoke one.
func (s *Server) tokensPage(c echo.Context) error {
	return s.renderTokens(c, http.StatusOK, "", "")
}

func (s *Server) renderTokens(c echo.Context, status int, flash, newToken string) error {
	ts, err := s.app.OwnTokens(c.Request().Context(), appActor(c))
	if err != nil {
		return err
	}
	v := templates.Tokens{New: newToken}
	for _, t := range ts {
		v.Tokens = append(v.Tokens, tokenRow(t))
	}
	p := page(c, "API tokens", "tokens")
	p.Flash = flash
	return s.render(c, status, templates.TokensPage(p, v))
}

func (s *Server) createTokenForm(c echo.Context) error {
	days, err := strconv.Atoi(c.FormValue("days"))
	if err != nil || days < 1 || days > app.MaxTokenDays {
		// Refused, naming the field; checked before it is made a
		// Duration, which 213504 days overflowed to 25 minutes.
		days = 0
	}
	tok, err := s.app.CreateToken(c.Request().Context(), appActor(c), c.FormValue("name"), time.Duration(days)*24*time.Hour)
	var ae *app.Error
	if errors.As(err, &ae) && ae.Kind == app.Invalid {
		return s.renderTokens(c, http.StatusBadRequest, ae.Msg, "")
	}
	if err != nil {
		return err
	}
	return s.renderTokens(c, http.StatusOK, "", tok.Token)
}

func (s *Server) revokeTokenForm(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "id: must be a number")
	}
	// Connections opened with it end.
	if err := s.app.RevokeOwnToken(c.Request().Context(), appActor(c), id); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/tokens")
}
