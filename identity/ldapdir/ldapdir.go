package ldapdir

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/gpuportal/gpuportal/identity"
)

// Directory signs people in against an LDAP directory: it finds their entry
// (as the service account, or anonymously), binds as them with their
// password, and reads their groups.
type Directory struct {
	cfg identity.LDAPConfig
	tls *tls.Config
}

// New prepares sign-in through the directory of cfg (checked by
// Flags.Load). It connects only when someone signs in.
func New(cfg identity.LDAPConfig) (*Directory, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("ldap url %q: %w", cfg.URL, err)
	}
	tc := &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pool, err := identity.CAPool(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ldap ca file: %w", err)
		}
		tc.RootCAs = pool
	}
	return &Directory{cfg: cfg, tls: tc}, nil
}

// Authenticate checks name and password against the directory and returns
// the person's entry and groups. A wrong password, an unknown name, or an
// empty password (which LDAP would take for an anonymous bind) is
// identity.ErrBadCredentials; a directory that cannot be reached or searched is
// identity.ErrUnavailable.
func (l *Directory) Authenticate(ctx context.Context, name, password string) (identity.Claims, error) {
	if name == "" || password == "" || len(name) > 256 {
		return identity.Claims{}, identity.ErrBadCredentials
	}
	conn, err := l.dial(ctx)
	if err != nil {
		return identity.Claims{}, err
	}
	defer conn.Close()
	if err := l.serviceBind(conn); err != nil {
		return identity.Claims{}, err
	}
	filter := strings.ReplaceAll(l.cfg.UserFilter, "{name}", ldap.EscapeFilter(name))
	attrs := []string{l.cfg.NameAttr}
	if l.cfg.UnixAttr != "" {
		attrs = append(attrs, l.cfg.UnixAttr)
	}
	res, err := conn.Search(ldap.NewSearchRequest(l.cfg.UserBase, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
		2, l.seconds(), false, filter, attrs, nil))
	if err != nil {
		return identity.Claims{}, fmt.Errorf("ldap: search %s for %q: %w: %w", l.cfg.UserBase, filter, err, identity.ErrUnavailable)
	}
	if len(res.Entries) != 1 {
		// None, or the name is ambiguous: nobody signs in as two entries.
		return identity.Claims{}, identity.ErrBadCredentials
	}
	entry := res.Entries[0]
	if err := conn.Bind(entry.DN, password); err != nil {
		if ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
			return identity.Claims{}, identity.ErrBadCredentials
		}
		return identity.Claims{}, fmt.Errorf("ldap: bind as %s: %w: %w", entry.DN, err, identity.ErrUnavailable)
	}
	c := identity.Claims{Source: "ldap", Subject: entry.DN, Name: entry.GetAttributeValue(l.cfg.NameAttr)}
	if c.Name == "" {
		return identity.Claims{}, fmt.Errorf("ldap: entry %s has no %s: %w", entry.DN, l.cfg.NameAttr, identity.ErrUnavailable)
	}
	if l.cfg.UnixAttr != "" {
		c.UnixName = entry.GetAttributeValue(l.cfg.UnixAttr)
	}
	// Groups are read as the service account where there is one (people
	// may not see their groups' members), else as the person.
	if err := l.serviceBind(conn); err != nil {
		return identity.Claims{}, err
	}
	c.Groups, err = l.groups(conn, entry.DN, c.Name)
	if err != nil {
		return identity.Claims{}, err
	}
	return c, nil
}

// Lookup reads the entry dn and its groups again, as the service account
// (or anonymously), to re-check a person between sign-ins. found is false
// when the entry is gone or no longer matches the user filter.
func (l *Directory) Lookup(ctx context.Context, dn string) (c identity.Claims, found bool, err error) {
	conn, err := l.dial(ctx)
	if err != nil {
		return identity.Claims{}, false, err
	}
	defer conn.Close()
	if err := l.serviceBind(conn); err != nil {
		return identity.Claims{}, false, err
	}
	filter := strings.ReplaceAll(l.cfg.UserFilter, "{name}", "*")
	attrs := []string{l.cfg.NameAttr}
	if l.cfg.UnixAttr != "" {
		attrs = append(attrs, l.cfg.UnixAttr)
	}
	res, err := conn.Search(ldap.NewSearchRequest(dn, ldap.ScopeBaseObject, ldap.NeverDerefAliases,
		1, l.seconds(), false, filter, attrs, nil))
	if ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) || err == nil && len(res.Entries) == 0 {
		return identity.Claims{}, false, nil
	}
	if err != nil {
		return identity.Claims{}, false, fmt.Errorf("ldap: read %s: %w: %w", dn, err, identity.ErrUnavailable)
	}
	entry := res.Entries[0]
	c = identity.Claims{Source: "ldap", Subject: entry.DN, Name: entry.GetAttributeValue(l.cfg.NameAttr)}
	if l.cfg.UnixAttr != "" {
		c.UnixName = entry.GetAttributeValue(l.cfg.UnixAttr)
	}
	if c.Groups, err = l.groups(conn, entry.DN, c.Name); err != nil {
		return identity.Claims{}, false, err
	}
	return c, true, nil
}

func (l *Directory) seconds() int { return max(1, int(time.Duration(l.cfg.Timeout).Seconds())) }

// dial connects, with TLS for ldaps:// and after StartTLS when asked.
func (l *Directory) dial(ctx context.Context) (*ldap.Conn, error) {
	timeout := time.Duration(l.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	conn, err := ldap.DialURL(l.cfg.URL, ldap.DialWithDialer(&net.Dialer{Timeout: timeout}), ldap.DialWithTLSConfig(l.tls))
	if err != nil {
		return nil, fmt.Errorf("ldap: connect to %s: %w: %w", l.cfg.URL, err, identity.ErrUnavailable)
	}
	conn.SetTimeout(timeout)
	if l.cfg.StartTLS {
		if err := conn.StartTLS(l.tls); err != nil {
			conn.Close()
			return nil, fmt.Errorf("ldap: StartTLS with %s: %w: %w", l.cfg.URL, err, identity.ErrUnavailable)
		}
	}
	return conn, nil
}

// serviceBind binds as the service account, if there is one.
func (l *Directory) serviceBind(conn *ldap.Conn) error {
	if l.cfg.BindDN == "" {
		return nil
	}
	if err := conn.Bind(l.cfg.BindDN, l.cfg.BindPassword()); err != nil {
		return fmt.Errorf("ldap: bind as service account %s: %w: %w", l.cfg.BindDN, err, identity.ErrUnavailable)
	}
	return nil
}

// groups returns the names of the groups of the entry dn (login name).
func (l *Directory) groups(conn *ldap.Conn, dn, name string) ([]string, error) {
	filter := strings.NewReplacer("{dn}", ldap.EscapeFilter(dn), "{name}", ldap.EscapeFilter(name)).Replace(l.cfg.GroupFilter)
	res, err := conn.Search(ldap.NewSearchRequest(l.cfg.GroupBase, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
		0, l.seconds(), false, filter, []string{l.cfg.GroupAttr}, nil))
	if err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject) {
		return nil, fmt.Errorf("ldap: search %s for %q: %w: %w", l.cfg.GroupBase, filter, err, identity.ErrUnavailable)
	}
	var out []string
	if res != nil {
		for _, e := range res.Entries {
			if g := e.GetAttributeValue(l.cfg.GroupAttr); g != "" {
				out = append(out, g)
			}
		}
	}
	return out, nil
}
