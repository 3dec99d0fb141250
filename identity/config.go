package identity

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// Config is how the portal reaches the lab's identity sources. It is
// read from a JSON file (--auth-config) and serve's flags; a flag given on
// the command line wins over the file. docs/operations.md shows both.
type Config struct {
	LDAP LDAPConfig `json:"ldap"`
	OIDC OIDCConfig `json:"oidc"`
	// Map holds the group rules ("group:ml-vision -> team vision") in
	// the order they are tried; the flags' rules follow the file's.
	Map []string `json:"map"`
	// DefaultTeam is the team of people whose groups name none.
	DefaultTeam string `json:"default_team"`
	// LinkLocalAccounts lets the first sign-in through a source take
	// over the local account of the same name (its jobs, tokens and
	// history), for a lab moving to the directory; otherwise that sign-in
	// is refused.
	LinkLocalAccounts bool `json:"link_local_accounts"`
	// SessionTTL is how long a session from a source lasts before the
	// person signs in again, and their groups are read again.
	SessionTTL Duration `json:"session_ttl"`

	// Mapping is Map, parsed, with DefaultTeam.
	Mapping Mapping `json:"-"`
}

// LDAPConfig reaches an LDAP directory.
type LDAPConfig struct {
	// URL is ldap://HOST[:PORT] or ldaps://HOST[:PORT]; empty: no LDAP.
	URL string `json:"url"`
	// StartTLS upgrades an ldap:// connection to TLS before any bind.
	StartTLS bool `json:"start_tls"`
	// Insecure allows a plain ldap:// URL without StartTLS, whose binds
	// carry passwords in clear; without it such a URL is refused.
	Insecure bool `json:"insecure"`
	// CAFile holds the PEM certificates that the server's is checked
	// against (ldaps:// or StartTLS); empty: the system's.
	CAFile string `json:"ca_file"`
	// BindDN and the password in BindPasswordFile (or the environment's
	// GPUPORTAL_LDAP_BIND_PASSWORD) are the service account that
	// searches; empty: anonymous search.
	BindDN           string `json:"bind_dn"`
	BindPasswordFile string `json:"bind_password_file"`
	// UserBase and UserFilter find a person's entry; {name} in the
	// filter is their login name, escaped.
	UserBase   string `json:"user_base"`
	UserFilter string `json:"user_filter"`
	// NameAttr holds the login name in the portal; UnixAttr, when set, the
	// Unix account their jobs run as (uid).
	NameAttr string `json:"name_attr"`
	UnixAttr string `json:"unix_attr"`
	// GroupBase and GroupFilter find their groups: {dn} is their entry's
	// DN and {name} their login name, escaped; GroupAttr is a group's name.
	GroupBase   string `json:"group_base"`
	GroupFilter string `json:"group_filter"`
	GroupAttr   string `json:"group_attr"`
	// Timeout bounds each exchange with the directory.
	Timeout Duration `json:"timeout"`
	// SyncInterval is how often the accounts from the directory are read
	// again between sign-ins, their teams and roles set anew, and the
	// sessions and tokens of those gone from it or from every mapped group
	// ended; 0: only at sign-in.
	SyncInterval Duration `json:"sync_interval"`

	bindPassword string
}

// OIDCConfig reaches an OpenID Connect provider.
type OIDCConfig struct {
	// Name is shown on the button: "Sign in with NAME".
	Name string `json:"name"`
	// Issuer is the provider's issuer URL, where discovery starts;
	// empty: no OpenID Connect.
	Issuer string `json:"issuer"`
	// ClientID and the secret in ClientSecretFile (or the environment's
	// GPUPORTAL_OIDC_CLIENT_SECRET) are the portal's registration at the
	// provider; a public client has no secret (PKCE protects the code).
	ClientID         string `json:"client_id"`
	ClientSecretFile string `json:"client_secret_file"`
	// RedirectURL is this portal's callback as the provider knows it:
	// https://PORTAL/login/oidc/callback.
	RedirectURL string `json:"redirect_url"`
	// Scopes asked for besides openid.
	Scopes []string `json:"scopes"`
	// UsernameClaim holds the login name (preferred_username), GroupsClaim
	// the groups (groups), UnixClaim, when set, the Unix account.
	UsernameClaim string `json:"username_claim"`
	GroupsClaim   string `json:"groups_claim"`
	UnixClaim     string `json:"unix_claim"`

	clientSecret string
}

// Enabled reports whether LDAP sign-in is configured.
func (c LDAPConfig) Enabled() bool { return c.URL != "" }

// BindPassword is the service account's password read from
// --ldap-bind-password-file (never logged or shown).
func (c LDAPConfig) BindPassword() string { return c.bindPassword }

// WithBindPassword is c with the service account's password pw, for a
// caller that holds it elsewhere than a file or the environment (tests).
func (c LDAPConfig) WithBindPassword(pw string) LDAPConfig {
	c.bindPassword = pw
	return c
}

// ClientSecret is the client secret read from --oidc-client-secret-file
// (never logged or shown).
func (c OIDCConfig) ClientSecret() string { return c.clientSecret }

// WithClientSecret is c with the client secret s, for a caller that holds
// the secret elsewhere than a file or the environment (tests, embedding).
func (c OIDCConfig) WithClientSecret(s string) OIDCConfig {
	c.clientSecret = s
	return c
}

// Enabled reports whether OpenID Connect sign-in is configured.
func (c OIDCConfig) Enabled() bool { return c.Issuer != "" }

// Duration is a time.Duration read as "12h" from flags and files.
type Duration time.Duration

// String writes d as time.Duration does.
func (d *Duration) String() string { return time.Duration(*d).String() }

// Set reads "12h".
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q: want a duration such as 12h", s)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON reads "12h".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"12h\": %w", err)
	}
	return d.Set(s)
}

// Flags are serve's flags for identity sources.
type Flags struct {
	fs   *flag.FlagSet
	file string
	cfg  Config
	maps []string
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	f.fs = fs
	c := &f.cfg
	c.SessionTTL = Duration(12 * time.Hour)
	c.LDAP.Timeout = Duration(10 * time.Second)
	c.LDAP.SyncInterval = Duration(15 * time.Minute)
	fs.StringVar(&f.file, "auth-config", "", "JSON file configuring sign-in through LDAP or OpenID Connect (docs/operations.md); flags given override it")
	fs.Func("auth-map", `a group rule, repeatable, tried in order: "group:ml-vision -> team vision", "group:gpu-admins -> admin"`, func(s string) error {
		f.maps = append(f.maps, s)
		return nil
	})
	fs.StringVar(&c.DefaultTeam, "auth-default-team", "", "team of people from LDAP or OpenID Connect whose groups name none (default: they may not sign in)")
	fs.BoolVar(&c.LinkLocalAccounts, "auth-link-local", false, "a first sign-in through LDAP or OpenID Connect takes over the local account of the same name")
	fs.Var(&c.SessionTTL, "sso-session-ttl", "how long a session from LDAP or OpenID Connect lasts; groups are read again at the next sign-in")
	fs.StringVar(&c.LDAP.URL, "ldap-url", "", "LDAP directory: ldap://HOST[:PORT] or ldaps://HOST[:PORT]; empty: no LDAP sign-in")
	fs.BoolVar(&c.LDAP.StartTLS, "ldap-start-tls", false, "upgrade the ldap:// connection with StartTLS")
	fs.BoolVar(&c.LDAP.Insecure, "ldap-insecure", false, "allow a plain ldap:// URL without --ldap-start-tls: passwords cross the network in clear (a warning is logged at start)")
	fs.StringVar(&c.LDAP.CAFile, "ldap-ca-file", "", "PEM file of the CA that signed the directory's certificate (default: the system's)")
	fs.StringVar(&c.LDAP.BindDN, "ldap-bind-dn", "", "DN of the service account that searches (default: anonymous search)")
	fs.StringVar(&c.LDAP.BindPasswordFile, "ldap-bind-password-file", "", "file holding the service account's password (or $GPUPORTAL_LDAP_BIND_PASSWORD)")
	fs.StringVar(&c.LDAP.UserBase, "ldap-user-base", "", "where people's entries are, e.g. ou=people,dc=lab,dc=example")
	fs.StringVar(&c.LDAP.UserFilter, "ldap-user-filter", "(&(objectClass=posixAccount)(uid={name}))", "filter that finds a person's entry; {name} is the login name")
	fs.StringVar(&c.LDAP.NameAttr, "ldap-name-attr", "uid", "attribute holding the login name")
	fs.StringVar(&c.LDAP.UnixAttr, "ldap-unix-attr", "uid", "attribute holding the Unix account; empty: the login name, or what an admin set")
	fs.StringVar(&c.LDAP.GroupBase, "ldap-group-base", "", "where groups are, e.g. ou=groups,dc=lab,dc=example (default: --ldap-user-base's parent)")
	fs.StringVar(&c.LDAP.GroupFilter, "ldap-group-filter", "(|(member={dn})(uniqueMember={dn})(memberUid={name}))", "filter that finds a person's groups; {dn} is their entry, {name} their login name")
	fs.StringVar(&c.LDAP.GroupAttr, "ldap-group-attr", "cn", "attribute holding a group's name")
	fs.Var(&c.LDAP.Timeout, "ldap-timeout", "bound on each exchange with the directory")
	fs.Var(&c.LDAP.SyncInterval, "ldap-sync-interval", "how often accounts from the directory are read again between sign-ins (teams and roles set anew; those gone lose their sessions and tokens); 0: only at sign-in")
	fs.StringVar(&c.OIDC.Issuer, "oidc-issuer", "", "OpenID Connect issuer URL (discovery starts there); empty: no OpenID Connect sign-in")
	fs.StringVar(&c.OIDC.Name, "oidc-name", "SSO", `name on the login button: "Sign in with NAME"`)
	fs.StringVar(&c.OIDC.ClientID, "oidc-client-id", "", "the portal's client ID at the provider")
	fs.StringVar(&c.OIDC.ClientSecretFile, "oidc-client-secret-file", "", "file holding the client secret (or $GPUPORTAL_OIDC_CLIENT_SECRET); none: a public client")
	fs.StringVar(&c.OIDC.RedirectURL, "oidc-redirect-url", "", "this portal's callback as registered at the provider: https://PORTAL/login/oidc/callback")
	fs.Var(listFlag{&c.OIDC.Scopes}, "oidc-scopes", "scopes besides openid, comma-separated (default profile,email,groups)")
	fs.StringVar(&c.OIDC.UsernameClaim, "oidc-username-claim", "preferred_username", "claim holding the login name")
	fs.StringVar(&c.OIDC.GroupsClaim, "oidc-groups-claim", "groups", "claim holding the groups")
	fs.StringVar(&c.OIDC.UnixClaim, "oidc-unix-claim", "", "claim holding the Unix account; empty: the login name, or what an admin set")
}

// listFlag is a comma-separated list flag.
type listFlag struct{ p *[]string }

func (l listFlag) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l listFlag) Set(s string) error {
	*l.p = splitList(s)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Load returns the configuration: the file of --auth-config, the flags
// given on the command line over it, secrets read from their files or the
// environment, and every value checked. Call it after fs.Parse.
func (f *Flags) Load() (Config, error) {
	c := f.cfg
	if f.file != "" {
		given := map[string]string{}
		f.fs.Visit(func(fl *flag.Flag) {
			if fl.Name != "auth-map" && fl.Name != "auth-config" {
				given[fl.Name] = fl.Value.String()
			}
		})
		b, err := os.ReadFile(f.file)
		if err != nil {
			return c, fmt.Errorf("--auth-config: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f.cfg); err != nil {
			return c, fmt.Errorf("--auth-config %s: %w", f.file, err)
		}
		for name, v := range given {
			if err := f.fs.Set(name, v); err != nil {
				return c, fmt.Errorf("--%s: %w", name, err)
			}
		}
		c = f.cfg
	}
	c.Map = append(c.Map, f.maps...)
	return c, c.check()
}

// check validates c, reads its secrets and parses its rules.
func (c *Config) check() error {
	c.Mapping = Mapping{DefaultTeam: c.DefaultTeam}
	for _, s := range c.Map {
		r, err := ParseRule(s)
		if err != nil {
			return fmt.Errorf("--auth-map: %w", err)
		}
		c.Mapping.Rules = append(c.Mapping.Rules, r)
	}
	if !c.LDAP.Enabled() && !c.OIDC.Enabled() {
		return nil
	}
	if len(c.Mapping.Rules) == 0 && c.DefaultTeam == "" {
		return errors.New("--auth-map or --auth-default-team: sign-in through LDAP or OpenID Connect needs groups mapped to teams, or a default team")
	}
	if c.SessionTTL <= 0 {
		return errors.New("--sso-session-ttl: must be positive")
	}
	if c.LDAP.Enabled() {
		if err := c.LDAP.check(); err != nil {
			return err
		}
	}
	if c.OIDC.Enabled() {
		if err := c.OIDC.check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *LDAPConfig) check() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "ldap" && u.Scheme != "ldaps") || u.Host == "" {
		return fmt.Errorf("--ldap-url %q: want ldap://HOST[:PORT] or ldaps://HOST[:PORT]", c.URL)
	}
	if c.StartTLS && u.Scheme == "ldaps" {
		return errors.New("--ldap-start-tls: only with an ldap:// URL (ldaps:// is TLS from the start)")
	}
	if c.Insecure && (u.Scheme != "ldap" || c.StartTLS) {
		return errors.New("--ldap-insecure: only for a plain ldap:// URL without --ldap-start-tls")
	}
	if u.Scheme == "ldap" && !c.StartTLS && !c.Insecure {
		return fmt.Errorf("--ldap-url %s: passwords would cross the network in clear: use ldaps://, or --ldap-start-tls, "+
			"or --ldap-insecure to allow it", c.URL)
	}
	if c.UserBase == "" {
		return errors.New("--ldap-user-base is required with --ldap-url")
	}
	if !strings.Contains(c.UserFilter, "{name}") {
		return fmt.Errorf("--ldap-user-filter %q: must hold {name}", c.UserFilter)
	}
	if c.NameAttr == "" || c.GroupAttr == "" {
		return errors.New("--ldap-name-attr and --ldap-group-attr must not be empty")
	}
	if c.GroupBase == "" {
		_, parent, _ := strings.Cut(c.UserBase, ",")
		c.GroupBase = parent
	}
	if c.CAFile != "" {
		if _, err := CAPool(c.CAFile); err != nil {
			return fmt.Errorf("--ldap-ca-file: %w", err)
		}
	}
	if c.Timeout <= 0 {
		return errors.New("--ldap-timeout: must be positive")
	}
	if c.SyncInterval > 0 && c.SyncInterval < Duration(time.Second) {
		return errors.New("--ldap-sync-interval: 1s or more, or 0 for none")
	}
	if c.BindDN != "" {
		pw, err := secret(c.BindPasswordFile, "GPUPORTAL_LDAP_BIND_PASSWORD")
		if err != nil {
			return fmt.Errorf("--ldap-bind-password-file: %w", err)
		}
		if pw == "" {
			return errors.New("--ldap-bind-dn needs --ldap-bind-password-file or $GPUPORTAL_LDAP_BIND_PASSWORD")
		}
		c.bindPassword = pw
	}
	return nil
}

// Cleartext reports whether the directory is reached without TLS
// (ldap:// without StartTLS, allowed by Insecure): the server warns.
func (c LDAPConfig) Cleartext() bool {
	u, err := url.Parse(c.URL)
	return c.Enabled() && err == nil && u.Scheme == "ldap" && !c.StartTLS
}

func (c *OIDCConfig) check() error {
	u, err := url.Parse(c.Issuer)
	if err != nil || !(u.Scheme == "https" || u.Scheme == "http" && loopback(u.Hostname())) || u.Host == "" {
		return fmt.Errorf("--oidc-issuer %q: want an https:// URL (http:// only on this machine)", c.Issuer)
	}
	if c.ClientID == "" {
		return errors.New("--oidc-client-id is required with --oidc-issuer")
	}
	r, err := url.Parse(c.RedirectURL)
	if err != nil || (r.Scheme != "https" && r.Scheme != "http") || r.Host == "" || r.Path != "/login/oidc/callback" {
		return fmt.Errorf("--oidc-redirect-url %q: want this portal's https://HOST/login/oidc/callback", c.RedirectURL)
	}
	if c.UsernameClaim == "" {
		return errors.New("--oidc-username-claim must not be empty")
	}
	if c.Name == "" {
		c.Name = "SSO"
	}
	if c.Scopes == nil {
		c.Scopes = []string{"profile", "email", "groups"}
	}
	pw, err := secret(c.ClientSecretFile, "GPUPORTAL_OIDC_CLIENT_SECRET")
	if err != nil {
		return fmt.Errorf("--oidc-client-secret-file: %w", err)
	}
	c.clientSecret = pw
	return nil
}

// loopback reports whether host is this machine, where plain
// connections stay off the network.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secret reads a secret from file (its first line), else from the
// environment variable env.
func secret(file, env string) (string, error) {
	if file == "" {
		return os.Getenv(env), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}

// CAPool reads the PEM certificates of file.
func CAPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}
