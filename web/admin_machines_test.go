package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
)

// TestAdminMachinesPage: an admin sees the registered machines and the
// join tokens, makes one with a name and an expiry (its secret shown
// once), and revokes it; each change is in the audit log with who made
// it. Bad input is a 400 naming the field, on the page.
func TestAdminMachinesPage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	if _, err := ts.store.RegisterMachine(ctx, "gpu-07", 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := ts.do(t, "admin", http.MethodGet, "/admin/machines", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /admin/machines: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []string{`data-machine="gpu-07"`, "disconnected", "last connected", "with the server&#39;s agent token", "No join tokens."} {
		if !strings.Contains(body, want) {
			t.Errorf("the machines page does not say %q", want)
		}
	}

	cases := []struct {
		name   string
		form   url.Values
		status int
		says   string
	}{
		{"a token needs a name", url.Values{"name": {""}, "ttl_s": {"3600"}}, 400, "name: "},
		{"a life is a number of seconds", url.Values{"name": {"rack 3"}, "ttl_s": {"a day"}}, 400, "ttl_s: "},
		{"a life is at most a year", url.Values{"name": {"rack 3"}, "ttl_s": {"40000000"}}, 400, "ttl_s: "},
		{"a day", url.Values{"name": {"rack 3"}, "ttl_s": {"86400"}}, 200, "New join token <strong>rack 3</strong>"},
	}
	for _, c := range cases {
		rec := ts.do(t, "admin", http.MethodPost, "/admin/machines/join-tokens", c.form.Encode())
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.says) {
			t.Errorf("%s: %d, want %d saying %q:\n%s", c.name, rec.Code, c.status, c.says, rec.Body)
		}
	}
	made := ts.do(t, "admin", http.MethodPost, "/admin/machines/join-tokens", url.Values{"name": {"rack 4"}, "ttl_s": {"0"}}.Encode()).Body.String()
	secret := regexp.MustCompile(`gpj_[0-9a-f]+`).FindString(made)
	if secret == "" {
		t.Fatalf("the new token's secret is not shown:\n%s", made)
	}
	if strings.Contains(ts.do(t, "admin", http.MethodGet, "/admin/machines", "").Body.String(), secret) {
		t.Error("the join token's secret is shown again after it was made")
	}
	rec = ts.do(t, "admin", http.MethodGet, "/api/v1/join-tokens", "")
	var tokens []api.JoinToken
	if err := json.Unmarshal(rec.Body.Bytes(), &tokens); err != nil || len(tokens) != 2 {
		t.Fatalf("join tokens: %v %s; want rack 3 and rack 4", err, rec.Body)
	}
	byName := map[string]api.JoinToken{}
	for _, tok := range tokens {
		byName[tok.Name] = tok
	}
	if d := byName["rack 3"]; d.ExpiresAt == nil || d.ExpiresAt.Sub(d.CreatedAt) != 24*time.Hour || d.CreatedBy != "admin" {
		t.Errorf("rack 3: %+v; want made by admin, for a day", d)
	}
	if d := byName["rack 4"]; d.ExpiresAt != nil {
		t.Errorf("rack 4: %+v; want no expiry", d)
	}
	page := ts.do(t, "admin", http.MethodGet, "/admin/machines", "").Body.String()
	if !strings.Contains(page, "never (until revoked)") || !strings.Contains(page, byName["rack 3"].ExpiresAt.Local().Format(timeLayout)) {
		t.Errorf("the page does not date the tokens:\n%s", page)
	}

	id := byName["rack 3"].ID
	rec = ts.do(t, "admin", http.MethodPost, "/admin/machines/join-tokens/"+strconv.FormatInt(id, 10)+"/revoke", "")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "revoked") {
		t.Fatalf("revoke: %d %s", rec.Code, rec.Body)
	}
	if rec := ts.do(t, "admin", http.MethodPost, "/admin/machines/join-tokens/"+strconv.FormatInt(id, 10)+"/revoke", ""); rec.Code != http.StatusNotFound {
		t.Errorf("revoke twice: %d, want 404", rec.Code)
	}
	if rec := ts.do(t, "admin", http.MethodPost, "/admin/machines/gpu-07/remove", ""); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `data-machine="gpu-07"`) {
		t.Errorf("forget gpu-07: %d, or still listed", rec.Code)
	}

	log, err := ts.store.AuditLog(ctx, 20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range log {
		if e.Actor == "admin" {
			got = append(got, e.Action+" "+e.Target)
		}
	}
	for _, want := range []string{"join-token.create " + strconv.FormatInt(id, 10), "join-token.revoke " + strconv.FormatInt(id, 10), "machine.remove gpu-07"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("the audit log lacks %q: %q", want, got)
		}
	}
	audit := ts.do(t, "admin", http.MethodGet, "/admin", "").Body.String()
	if !strings.Contains(audit, "join-token.revoke") {
		t.Error("the admin page's audit log does not show the revocation")
	}
}

// TestAdminFormsRefuseWithoutCSRF: the machines page's forms, as every
// form, need the page's CSRF token.
func TestAdminFormsRefuseWithoutCSRF(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	for _, target := range []string{"/admin/machines/join-tokens", "/admin/machines/join-tokens/1/revoke", "/admin/machines/x/remove"} {
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader("name=rack&ttl_s=60"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: ts.sessions["admin"]})
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("POST %s without a CSRF token: %d, want 403", target, rec.Code)
		}
	}
}

// TestOneUsersTable: the admin page lists each user once, in one table
// with their Unix account, where they sign in, their state and their API
// tokens named and dated; the new-user form's defaults are accepted.
func TestOneUsersTable(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	page := ts.do(t, "admin", http.MethodGet, "/admin", "").Body.String()
	for _, u := range roles[1:] {
		if n := strings.Count(page, `data-user="`+u+`"`); n != 1 {
			t.Errorf("%s is listed %d times; want once", u, n)
		}
	}
	if strings.Contains(page, `id="accounts"`) {
		t.Error("a second table of users (accounts)")
	}
	for _, want := range []string{"Unix account", "Signs in", "last used never", "created "} {
		if !strings.Contains(page, want) {
			t.Errorf("the users table does not say %q", want)
		}
	}
	// The new-user form as it comes: its first team is chosen.
	form := page[strings.Index(page, `action="/admin/create-user"`):]
	form = form[:strings.Index(form, "</form>")]
	team := regexp.MustCompile(`<select name="team"><option value="([^"]*)"`).FindStringSubmatch(form)
	role := regexp.MustCompile(`<select name="role"><option value="([^"]*)"`).FindStringSubmatch(form)
	if team == nil || role == nil {
		t.Fatalf("no team or role in the new-user form:\n%s", form)
	}
	rec := ts.do(t, "admin", http.MethodPost, "/admin/create-user",
		url.Values{"name": {"carol"}, "role": {role[1]}, "team": {team[1]}, "password": {"correct horse"}}.Encode())
	if rec.Code != http.StatusOK {
		t.Errorf("the new-user form's defaults (role %q, team %q) are refused: %d", role[1], team[1], rec.Code)
	}
}

// TestAPITokensNamedAndDated: a token asked for over the API is named
// (as asked, or after the program that asked), its creation is audited,
// and its last use is kept and shown.
func TestAPITokensNamedAndDated(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	issue := func(body, agent string) (int, api.Token) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/tokens", strings.NewReader(body))
		req.SetBasicAuth("alice", "password1")
		req.Header.Set("User-Agent", agent)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, req)
		var out api.Token
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, out
	}
	code, named := issue(`{"name":"laptop"}`, "curl/8.5.0")
	if code != http.StatusCreated || named.Name != "laptop" {
		t.Fatalf("named token: %d %+v", code, named)
	}
	code, unnamed := issue("", "curl/8.5.0 (x86_64)")
	if code != http.StatusCreated || unnamed.Name != "api: curl/8.5.0" {
		t.Fatalf("unnamed token: %d %+v; want named after curl", code, unnamed)
	}
	if code, _ := issue(`{"name":" padded"}`, "curl"); code != http.StatusBadRequest {
		t.Errorf("a name with spaces around: %d, want 400", code)
	}
	// Used once: its last use is kept.
	req := httptest.NewRequest(http.MethodGet, "/api/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+named.Token)
	rec := httptest.NewRecorder()
	ts.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/me with the token: %d", rec.Code)
	}
	rec = ts.do(t, "admin", http.MethodGet, "/api/v1/users/alice/tokens", "")
	var list []api.APIToken
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatal(err, rec.Body)
	}
	seen := map[string]api.APIToken{}
	for _, tok := range list {
		seen[tok.Name] = tok
	}
	if tok, ok := seen["laptop"]; !ok || tok.LastUsedAt == nil || tok.CreatedAt.IsZero() {
		t.Errorf("laptop: %+v; want created and last used", tok)
	}
	if tok, ok := seen["api: curl/8.5.0"]; !ok || tok.LastUsedAt != nil {
		t.Errorf("api: curl/8.5.0: %+v; want never used", tok)
	}
	mine := ts.do(t, "alice", http.MethodGet, "/tokens", "").Body.String()
	if !strings.Contains(mine, "laptop") || !strings.Contains(mine, seen["laptop"].LastUsedAt.Local().Format(timeLayout)) {
		t.Errorf("alice's tokens page does not show laptop's last use:\n%s", mine)
	}
	log, err := ts.store.AuditLog(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	for _, e := range log {
		if e.Action == "token.create" && e.Actor == "alice" {
			created++
		}
	}
	if created != 2 {
		t.Errorf("%d token creations of alice's audited; want 2", created)
	}
}
