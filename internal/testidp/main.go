// Command testidp is an OpenID Connect provider for gpuportal's
// integration tests: zitadel/oidc's provider (op), its in-memory example
// storage, and users, groups and Unix accounts read from a JSON file. It
// serves discovery, the authorization endpoint with its login form, the
// token, userinfo, keys and end_session endpoints, and checks PKCE. It is
// a real provider run as its own process, not a stub: tests drive it
// through a browser.
//
//	testidp --users users.json --client-id gpuportal --client-secret S \
//	    --redirect-uri http://127.0.0.1:8080/login/oidc/callback \
//	    --post-logout-uri http://127.0.0.1:8080/login
//
// It prints "testidp issuer http://127.0.0.1:PORT" once it listens, and
// logs each request on stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// person is one user of the users file.
type person struct {
	ID       string   `json:"id"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Email    string   `json:"email"`
	Groups   []string `json:"groups"`
	UnixName string   `json:"unix_name"`
}

// users is the example storage's UserStore over the users file.
type users struct{ byID map[string]person }

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

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testidp:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	usersFile := flag.String("users", "", "JSON file of users: [{id, username, password, email, groups, unix_name}]")
	clientID := flag.String("client-id", "gpuportal", "the one client's ID")
	secret := flag.String("client-secret", "", "its secret")
	redirect := flag.String("redirect-uri", "", "its redirect URI")
	postLogout := flag.String("post-logout-uri", "", "its post-logout redirect URI")
	flag.Parse()
	if *usersFile == "" || *secret == "" || *redirect == "" {
		return errors.New("--users, --client-secret and --redirect-uri are required")
	}
	b, err := os.ReadFile(*usersFile)
	if err != nil {
		return err
	}
	var people []person
	if err := json.Unmarshal(b, &people); err != nil {
		return fmt.Errorf("%s: %w", *usersFile, err)
	}
	us := users{byID: map[string]person{}}
	for _, p := range people {
		us.byID[p.ID] = p
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	issuer := "http://" + ln.Addr().String()
	storage.RegisterClients(storage.WebClient(*clientID, *secret, *redirect))
	st := &store{Storage: storage.NewStorage(us), users: us}
	if *postLogout != "" {
		st.postLogout = []string{*postLogout}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	router := exampleop.SetupServer(issuer, st, logger, false)
	srv := &http.Server{Handler: router}
	fmt.Printf("testidp issuer %s\n", issuer)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
