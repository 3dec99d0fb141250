// Package identity signs people in through the lab's own identity
// sources: an LDAP directory (a bind with the person's password, their
// entry and groups searched) and an OpenID Connect provider (the
// authorization code flow with PKCE, discovery, ID token verification and
// RP-initiated logout). It says who signed in and what their groups make
// of them in the portal (Mapping); the store records it
// (models.SyncExternalUser) and the web package drives the flows.
package identity

import "errors"

// Claims is who a source says signed in.
type Claims struct {
	// Source is "ldap" or "oidc" (models.SourceLDAP, models.SourceOIDC).
	Source string
	// Subject names the person at the source for good: the DN of their
	// LDAP entry, or the provider's issuer and subject ("ISSUER|SUB").
	Subject string
	// Name is their login name in the portal.
	Name string
	// UnixName is the Unix account the source names (an LDAP attribute,
	// an OIDC claim), or empty when none is configured or given.
	UnixName string
	// Groups are the names of their groups at the source.
	Groups []string
}

// ErrBadCredentials: the source refused the name and password.
var ErrBadCredentials = errors.New("wrong user name or password")

// ErrUnavailable: the source could not be reached or answered with an
// error; the message says which and why.
var ErrUnavailable = errors.New("identity source unavailable")

// Unavailable reports whether err is a source that could not be reached
// or searched (not a refusal of the person).
func Unavailable(err error) bool { return errors.Is(err, ErrUnavailable) }
