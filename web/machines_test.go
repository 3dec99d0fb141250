package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
)

// TestJoinTokenAPI: only admins create, list and revoke join tokens and
// remove machines; each action is audited; bad input names the field.
func TestJoinTokenAPI(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	for _, role := range []string{"anonymous", "alice", "lead"} {
		if rec := ts.do(t, role, http.MethodPost, "/api/v1/join-tokens", `{"name":"rack"}`); rec.Code != http.StatusUnauthorized && rec.Code != http.StatusForbidden {
			t.Errorf("%s creates a join token: %d", role, rec.Code)
		}
		if rec := ts.do(t, role, http.MethodGet, "/api/v1/machines", ""); rec.Code != http.StatusUnauthorized && rec.Code != http.StatusForbidden {
			t.Errorf("%s lists machines: %d", role, rec.Code)
		}
	}
	for body, field := range map[string]string{`{"name":""}`: "name:", `{"name":"x","ttl_s":-1}`: "ttl_s:", `{"name":"x","ttl_s":99999999999}`: "ttl_s:"} {
		if rec := ts.do(t, "admin", http.MethodPost, "/api/v1/join-tokens", body); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), field) {
			t.Errorf("create %s: %d %s, want 400 naming %s", body, rec.Code, rec.Body, field)
		}
	}
	rec := ts.do(t, "admin", http.MethodPost, "/api/v1/join-tokens", `{"name":"rack 3","ttl_s":3600}`)
	var created api.NewJoinToken
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &created) != nil || !strings.HasPrefix(created.Token, "gpj_") ||
		!created.JoinToken.Active || created.JoinToken.CreatedBy != "admin" {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	ctx := context.Background()
	if _, err := ts.store.JoinTokenFor(ctx, created.Token, time.Now()); err != nil {
		t.Fatalf("the token does not join: %v", err)
	}
	if _, err := ts.store.RegisterMachine(ctx, "gpu-01", created.JoinToken.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	var list []api.JoinToken
	rec = ts.do(t, "admin", http.MethodGet, "/api/v1/join-tokens", "")
	if json.Unmarshal(rec.Body.Bytes(), &list) != nil || len(list) != 1 || list[0].Machines != 1 || strings.Contains(rec.Body.String(), created.Token[4:]) {
		t.Errorf("list: %s (the token itself must not be listed)", rec.Body)
	}
	path := "/api/v1/join-tokens/" + jsonInt(created.JoinToken.ID)
	if rec := ts.do(t, "admin", http.MethodDelete, path, ""); rec.Code != http.StatusNoContent {
		t.Errorf("revoke: %d %s", rec.Code, rec.Body)
	}
	if rec := ts.do(t, "admin", http.MethodDelete, path, ""); rec.Code != http.StatusNotFound {
		t.Errorf("revoke twice: %d", rec.Code)
	}
	if _, err := ts.store.JoinTokenFor(ctx, created.Token, time.Now()); err == nil {
		t.Error("a revoked token still joins")
	}
	var ms []api.Machine
	rec = ts.do(t, "admin", http.MethodGet, "/api/v1/machines", "")
	if json.Unmarshal(rec.Body.Bytes(), &ms) != nil || len(ms) != 1 || ms[0].Name != "gpu-01" || ms[0].JoinedWith != created.JoinToken.ID {
		t.Errorf("machines: %s", rec.Body)
	}
	if rec := ts.do(t, "admin", http.MethodDelete, "/api/v1/machines/gpu-01", ""); rec.Code != http.StatusNoContent {
		t.Errorf("remove machine: %d", rec.Code)
	}
	if rec := ts.do(t, "admin", http.MethodDelete, "/api/v1/machines/gpu-01", ""); rec.Code != http.StatusNotFound {
		t.Errorf("remove it again: %d", rec.Code)
	}
	audit, err := ts.store.AuditLog(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range audit {
		actions = append(actions, e.Action)
	}
	for _, want := range []string{"join-token.create", "join-token.revoke", "machine.remove"} {
		if !strings.Contains(strings.Join(actions, " "), want) {
			t.Errorf("audit %v lacks %s", actions, want)
		}
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }
