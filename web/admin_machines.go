package web

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/templates"
)

// The admin's page of machines and join tokens (docs/agents.md, "Joining
// machines"): every machine with its state, when it was last heard from
// and its GPUs; join tokens named and dated, made and revoked here as with
// POST /api/v1/join-tokens and `gpuportal admin create-join-token`, by the
// same app actions (authorized and audited there).

func (s *Server) adminMachinesPage(c echo.Context) error {
	return s.renderAdminMachines(c, http.StatusOK, "", "", nil)
}

// machineRows is every machine connected now or registered by an agent,
// by name: its state as GET /api/v1/nodes says it (one computation).
func (s *Server) machineRows(c echo.Context, tokens []api.JoinToken) ([]templates.MachineRow, error) {
	registered, err := s.app.Machines(c.Request().Context(), appActor(c))
	if err != nil {
		return nil, err
	}
	tokenNames := make(map[int64]string, len(tokens))
	for _, t := range tokens {
		tokenNames[t.ID] = t.Name
	}
	joined := func(m api.Machine) string {
		if m.JoinedWith == 0 {
			return "with the server's agent token, " + m.CreatedAt.Local().Format(timeLayout)
		}
		return fmt.Sprintf("with join token %q, %s", cmp.Or(tokenNames[m.JoinedWith], strconv.FormatInt(m.JoinedWith, 10)),
			m.CreatedAt.Local().Format(timeLayout))
	}
	byName := make(map[string]api.Machine, len(registered))
	for _, m := range registered {
		byName[m.Name] = m
	}
	var out []templates.MachineRow
	for _, n := range s.app.ConnectedNodes() {
		row := templates.MachineRow{Name: n.Name, State: n.State, Jobs: len(n.Jobs), Joined: "built in (serve --sim-gpus)",
			LastHeard: "now: connected since " + n.ConnectedAt.Local().Format(timeLayout)}
		row.GPUs, row.Unhealthy = gpuSummary(n.GPUs)
		if m, ok := byName[n.Name]; ok {
			row.Joined, row.Registered = joined(m), true
			delete(byName, n.Name)
		}
		out = append(out, row)
	}
	for _, m := range byName {
		out = append(out, templates.MachineRow{Name: m.Name, State: "disconnected", GPUs: "—", Joined: joined(m), Registered: true,
			LastHeard: "last connected " + m.LastSeenAt.Local().Format(timeLayout)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// gpuSummary writes a machine's GPUs as "4 × A100 80 GB", models apart,
// and how many are out of service.
func gpuSummary(gs []api.GPU) (string, string) {
	if len(gs) == 0 {
		return "none", ""
	}
	var models []string
	count := map[string]int{}
	bad := 0
	for _, g := range gs {
		if count[g.Model] == 0 {
			models = append(models, g.Model)
		}
		count[g.Model]++
		if g.Health != "ok" {
			bad++
		}
	}
	parts := make([]string, len(models))
	for i, m := range models {
		parts[i] = fmt.Sprintf("%d × %s", count[m], m)
	}
	unhealthy := ""
	if bad > 0 {
		unhealthy = fmt.Sprintf("%d unhealthy", bad)
	}
	return strings.Join(parts, ", "), unhealthy
}

func (s *Server) renderAdminMachines(c echo.Context, status int, flash, notice string, made *api.NewJoinToken) error {
	var v templates.AdminMachines
	tokens, err := s.app.JoinTokens(c.Request().Context(), appActor(c))
	if err != nil {
		return err
	}
	if v.Machines, err = s.machineRows(c, tokens); err != nil {
		return err
	}
	for _, t := range tokens {
		row := templates.JoinTokenRow{ID: t.ID, Name: t.Name, Created: t.CreatedAt.Local().Format(timeLayout), CreatedBy: t.CreatedBy,
			Expires: "never (until revoked)", Machines: t.Machines, Active: t.Active, State: "active"}
		if t.ExpiresAt != nil {
			row.Expires = t.ExpiresAt.Local().Format(timeLayout)
		}
		switch {
		case t.RevokedAt != nil:
			row.State = "revoked " + t.RevokedAt.Local().Format(timeLayout)
		case !t.Active:
			row.State = "expired"
		}
		v.Tokens = append(v.Tokens, row)
	}
	if made != nil {
		v.NewToken, v.NewTokenName = made.Token, made.JoinToken.Name
		v.ServerURL = c.Scheme() + "://" + c.Request().Host
	}
	p := page(c, "Machines and join tokens", "admin")
	p.Flash, p.Notice = flash, notice
	return s.render(c, status, templates.AdminMachinesPage(p, v))
}

// adminFormError shows a refusal of an admin's form on its page, with its
// status: a field at fault (400), forbidden (403), not found (404),
// conflict (409). Anything else is the server's error.
func adminFormError(err error, show func(status int, msg string) error) error {
	var ae *app.Error
	if errors.As(err, &ae) && ae.Kind != app.Unavailable {
		return show(appStatus(ae.Kind), ae.Msg)
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code >= 400 && he.Code < 500 {
		msg, _ := he.Message.(string)
		return show(he.Code, msg)
	}
	return err
}

func (s *Server) createJoinTokenForm(c echo.Context) error {
	show := func(status int, msg string) error { return s.renderAdminMachines(c, status, msg, "", nil) }
	req := api.JoinTokenRequest{Name: c.FormValue("name")}
	ttl, err := strconv.ParseInt(c.FormValue("ttl_s"), 10, 64)
	if err != nil {
		return show(http.StatusBadRequest, "ttl_s: want a number of seconds (0: until revoked)")
	}
	req.TTLS = &ttl
	made, err := s.app.CreateJoinToken(c.Request().Context(), appActor(c), req)
	if err != nil {
		return adminFormError(err, show)
	}
	return s.renderAdminMachines(c, http.StatusOK, "", "", &made)
}

func (s *Server) revokeJoinTokenForm(c echo.Context) error {
	show := func(status int, msg string) error { return s.renderAdminMachines(c, status, msg, "", nil) }
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return show(http.StatusBadRequest, "id: want a join token's number")
	}
	if err := s.app.RevokeJoinToken(c.Request().Context(), appActor(c), id); err != nil {
		return adminFormError(err, show)
	}
	return s.renderAdminMachines(c, http.StatusOK, "", fmt.Sprintf("Join token %d revoked: no more machines join with it.", id), nil)
}

func (s *Server) removeMachineForm(c echo.Context) error {
	show := func(status int, msg string) error { return s.renderAdminMachines(c, status, msg, "", nil) }
	name := c.Param("name")
	if err := s.app.RemoveMachine(c.Request().Context(), appActor(c), name); err != nil {
		return adminFormError(err, show)
	}
	return s.renderAdminMachines(c, http.StatusOK, "", fmt.Sprintf("Machine %s forgotten: its agent must join again.", name), nil)
}
