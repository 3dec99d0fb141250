// Package testidp is an OpenID Connect provider for gpuportal's tests:
// zitadel/oidc's provider (op) with its in-memory example storage, and
// users, groups and Unix accounts of the test's choosing. It serves
// discovery, the authorization endpoint with its login form, the token,
// userinfo, keys and end_session endpoints, and checks PKCE. It is a real
// provider, not a stub: the identity package's tests run it in process,
// the integration tests as its own process (cmd/testidp) driven by a
// browser.
package testidp

import (
	"context"
	"log/slog"
	"net/http"
	"slices"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// Person is one user of the provider.
type Person struct {
	ID       string   `json:"id"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Email    string   `json:"email"`
	Groups   []string `json:"groups"`
	UnixName string   `json:"unix_name"`
}

// users is the example storage's UserStore over the users file.
type users struct{ byID map[string]Person }

func (u users) GetUserByID(id string) *storage.User {
	p, ok := u.byID[id]
	if !ok {
		return nil
	}
	return &storage.User{ID: p.ID, Username: p.Username, Password: p.Password, FirstName: p.Username, LastName: "Test",
		Email: p.Email, EmailVerified: true, PreferredLanguage: language.English}
}

func (u users) GetUserByUsername(name string) *storage.User {
	for id, p := range u.byID {
		if p.Username == name {
			return u.GetUserByID(id)
		}
	}
	return nil
}

func (u users) ExampleClientID() string { return storage.ServiceUserID }

// store is the example storage with groups and the Unix account added
// to the ID token (scope "groups") and to userinfo, and the portal's
// post-logout URI registered.
type store struct {
	*storage.Storage
	users      users
	postLogout []string
}

// claims adds the person's groups and Unix account when the groups scope
// was asked for.
func (s *store) claims(info *oidc.UserInfo, userID string, scopes []string) {
	p, ok := s.users.byID[userID]
	if !ok || !slices.Contains(scopes, "groups") {
		return
	}
	info.AppendClaims("groups", p.Groups)
	if p.UnixName != "" {
		info.AppendClaims("unix_name", p.UnixName)
	}
}

// SetUserinfoFromRequest fills the ID token.
func (s *store) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	s.claims(info, req.GetSubject(), scopes)
	return nil
}

// SetUserinfoFromToken fills userinfo.
func (s *store) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	s.claims(info, subject, []string{"groups"})
	return nil
}

// GetClientByClientID registers the post-logout URIs with the client.
func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return logoutClient{Client: c, uris: s.postLogout}, nil
}

type logoutClient struct {
	op.Client
	uris []string
}

func (c logoutClient) PostLogoutRedirectURIs() []string { return c.uris }

// Client is the one client (relying party) the provider knows.
type Client struct {
	ID, Secret, RedirectURI string
	// PostLogoutURI is where end_session may send the browser back to.
	PostLogoutURI string
}

// Handler returns the provider of issuer (its http:// URL, no trailing
// slash) for people and client.
func Handler(issuer string, people []Person, client Client, logger *slog.Logger) http.Handler {
	us := users{byID: map[string]Person{}}
	for _, p := range people {
		us.byID[p.ID] = p
	}
	storage.RegisterClients(storage.WebClient(client.ID, client.Secret, client.RedirectURI))
	st := &store{Storage: storage.NewStorage(us), users: us}
	if client.PostLogoutURI != "" {
		st.postLogout = []string{client.PostLogoutURI}
	}
	return exampleop.SetupServer(issuer, st, logger, false)
}
