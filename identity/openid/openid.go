package openid

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/gpuportal/gpuportal/identity"
)

// Provider signs people in through an OpenID Connect provider: the
// authorization code flow with PKCE (S256), state and nonce, the ID token
// verified against the provider's keys (issuer, audience, expiry,
// signature), and groups read from the ID token or else from userinfo.
type Provider struct {
	cfg    identity.OIDCConfig
	client *http.Client

	mu sync.Mutex
	// disc is the provider's discovery, made at the first sign-in that
	// finds it reachable, so that the portal (and its local accounts)
	// starts while the provider is down.
	disc *discovery
}

type discovery struct {
	provider   *oidc.Provider
	verifier   *oidc.IDTokenVerifier
	oauth      oauth2.Config
	endSession string
}

// New prepares sign-in through the provider of cfg (checked by
// Flags.Load).
func New(cfg identity.OIDCConfig) *Provider {
	return &Provider{cfg: cfg, client: &http.Client{Timeout: 15 * time.Second}}
}

// Name is the provider's name on the login button.
func (o *Provider) Name() string { return o.cfg.Name }

func (o *Provider) discover(ctx context.Context) (*discovery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.disc != nil {
		return o.disc, nil
	}
	ctx = oidc.ClientContext(ctx, o.client)
	p, err := oidc.NewProvider(ctx, o.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discovery at %s: %w: %w", o.cfg.Issuer, err, identity.ErrUnavailable)
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&extra); err != nil {
		return nil, fmt.Errorf("oidc: discovery at %s: %w: %w", o.cfg.Issuer, err, identity.ErrUnavailable)
	}
	o.disc = &discovery{
		provider: p,
		verifier: p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID}),
		oauth: oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret(), Endpoint: p.Endpoint(),
			RedirectURL: o.cfg.RedirectURL, Scopes: append([]string{oidc.ScopeOpenID}, o.cfg.Scopes...)},
		endSession: extra.EndSession,
	}
	return o.disc, nil
}

// Flow is one sign-in under way: the secrets the browser carries (in a
// short-lived cookie) from the start to the callback.
type Flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	// Next is where the person goes once signed in.
	Next string `json:"x"`
}

// Start begins a sign-in: the provider's authorization URL, and the
// flow to keep until the callback.
func (o *Provider) Start(ctx context.Context, next string) (authURL string, f Flow, err error) {
	d, err := o.discover(ctx)
	if err != nil {
		return "", f, err
	}
	f = Flow{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), Next: next}
	return d.oauth.AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), f, nil
}

// ErrFlow: the callback does not belong to the flow the browser began
// (state or nonce differ), or the provider refused.
var ErrFlow = errors.New("sign-in flow refused")

// Finish completes a sign-in at the callback: it checks state, exchanges
// the code (with the PKCE verifier), verifies the ID token and its nonce,
// and returns who signed in.
func (o *Provider) Finish(ctx context.Context, f Flow, query url.Values) (identity.Claims, error) {
	if e := query.Get("error"); e != "" {
		return identity.Claims{}, fmt.Errorf("oidc: the provider answered %s: %s: %w", e, query.Get("error_description"), ErrFlow)
	}
	if f.State == "" || query.Get("state") != f.State {
		return identity.Claims{}, fmt.Errorf("oidc: state does not match the sign-in this browser began: %w", ErrFlow)
	}
	d, err := o.discover(ctx)
	if err != nil {
		return identity.Claims{}, err
	}
	ctx = oidc.ClientContext(ctx, o.client)
	tok, err := d.oauth.Exchange(ctx, query.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return identity.Claims{}, fmt.Errorf("oidc: exchange the code: %w: %w", err, ErrFlow)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok {
		return identity.Claims{}, fmt.Errorf("oidc: the token response has no id_token: %w", ErrFlow)
	}
	idt, err := d.verifier.Verify(ctx, raw)
	if err != nil {
		return identity.Claims{}, fmt.Errorf("oidc: verify the ID token: %w: %w", err, ErrFlow)
	}
	if idt.Nonce != f.Nonce {
		return identity.Claims{}, fmt.Errorf("oidc: the ID token's nonce does not match: %w", ErrFlow)
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return identity.Claims{}, fmt.Errorf("oidc: read the ID token's claims: %w: %w", err, ErrFlow)
	}
	// Providers that keep the name, groups or Unix account out of the ID
	// token give them at userinfo, for the same subject; the ID token's
	// claims win where both have one.
	if o.missing(claims) {
		if ui, err := d.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil && ui.Subject == idt.Subject {
			more := map[string]any{}
			if err := ui.Claims(&more); err == nil {
				for k, v := range more {
					if _, have := claims[k]; !have {
						claims[k] = v
					}
				}
			}
		}
	}
	c := identity.Claims{Source: "oidc", Subject: idt.Issuer + "|" + idt.Subject}
	c.Name, _ = claims[o.cfg.UsernameClaim].(string)
	if c.Name == "" {
		return identity.Claims{}, fmt.Errorf("oidc: the ID token has no %s claim: %w", o.cfg.UsernameClaim, ErrFlow)
	}
	if o.cfg.UnixClaim != "" {
		c.UnixName, _ = claims[o.cfg.UnixClaim].(string)
	}
	c.Groups = stringList(claims[o.cfg.GroupsClaim])
	return c, nil
}

// missing reports whether claims lack one the configuration reads.
func (o *Provider) missing(claims map[string]any) bool {
	for _, k := range []string{o.cfg.UsernameClaim, o.cfg.GroupsClaim, o.cfg.UnixClaim} {
		if _, ok := claims[k]; k != "" && !ok {
			return true
		}
	}
	return false
}

// LogoutURL returns where to send a person who signs out, to end their
// session at the provider too (RP-initiated logout), coming back to
// postLogout; empty when the provider advertises no end_session_endpoint
// or cannot be reached.
func (o *Provider) LogoutURL(ctx context.Context, postLogout string) string {
	d, err := o.discover(ctx)
	if err != nil || d.endSession == "" {
		return ""
	}
	u, err := url.Parse(d.endSession)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("client_id", o.cfg.ClientID)
	q.Set("post_logout_redirect_uri", postLogout)
	u.RawQuery = q.Encode()
	return u.String()
}

// EncodeFlow and DecodeFlow carry a Flow in a cookie.
func EncodeFlow(f Flow) string {
	b, _ := json.Marshal(f)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeFlow reads what EncodeFlow wrote.
func DecodeFlow(s string) (Flow, error) {
	var f Flow
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		return f, fmt.Errorf("oidc: sign-in cookie: %w", ErrFlow)
	}
	return f, nil
}

// stringList reads a claim of groups: a list of strings, or one string.
func stringList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, g := range v {
			if s, ok := g.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
