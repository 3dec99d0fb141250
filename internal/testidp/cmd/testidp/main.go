// Command testidp runs the test OpenID Connect provider of
// internal/testidp as its own process, for the integration tests:
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
	"syscall"

	"github.com/gpuportal/gpuportal/internal/testidp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "testidp:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	usersFile := flag.String("users", "", "JSON file of users: [{id, username, password, email, groups, unix_name}]")
	var c testidp.Client
	flag.StringVar(&c.ID, "client-id", "gpuportal", "the one client's ID")
	flag.StringVar(&c.Secret, "client-secret", "", "its secret")
	flag.StringVar(&c.RedirectURI, "redirect-uri", "", "its redirect URI")
	flag.StringVar(&c.PostLogoutURI, "post-logout-uri", "", "its post-logout redirect URI")
	flag.Parse()
	if *usersFile == "" || c.Secret == "" || c.RedirectURI == "" {
		return errors.New("--users, --client-secret and --redirect-uri are required")
	}
	b, err := os.ReadFile(*usersFile)
	if err != nil {
		return err
	}
	var people []testidp.Person
	if err := json.Unmarshal(b, &people); err != nil {
		return fmt.Errorf("%s: %w", *usersFile, err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	issuer := "http://" + ln.Addr().String()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv := &http.Server{Handler: testidp.Handler(issuer, people, c, logger)}
	fmt.Printf("testidp issuer %s\n", issuer)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
