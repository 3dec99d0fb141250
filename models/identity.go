package models

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Where an account signs in (User.Source).
const (
	// SourceLocal: a password kept by the portal (bcrypt).
	SourceLocal = "local"
	// SourceLDAP: a bind to the lab's LDAP directory.
	SourceLDAP = "ldap"
	// SourceOIDC: the lab's OpenID Connect identity provider.
	SourceOIDC = "oidc"
)

// externalPassword is the password hash of an account that signs in
// elsewhere: no password matches it.
const externalPassword = "!external"

// MaxUnixNameLen is the longest Unix account name accepted (as useradd).
const MaxUnixNameLen = 32

// CheckUnixName reports what is wrong with name as a Unix account name,
// or nil: 1 to MaxUnixNameLen characters of the portable set, lower-case
// letters, digits, '_', '-' and '.', not starting with '-' or a digit
// alone, as useradd and Slurm accept them.
func CheckUnixName(name string) error {
	switch {
	case name == "":
		return errors.New("is required")
	case len(name) > MaxUnixNameLen:
		return fmt.Errorf("is %d characters long; at most %d", len(name), MaxUnixNameLen)
	}
	digits := true
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r == '_' || r >= '0' && r <= '9' || i > 0 && (r == '-' || r == '.')
		if !ok {
			return fmt.Errorf("%q: use lower-case letters, digits, '_', '-' and '.', not starting with '-' or '.'", name)
		}
		digits = digits && r >= '0' && r <= '9'
	}
	if digits {
		return fmt.Errorf("%q: a name of digits alone reads as a uid", name)
	}
	return nil
}

// UnixName returns the Unix account name that the jobs of the user called
// name run as: the one the directory, the identity provider or an admin
// gave them, else their login name. It is the one place that answers
// this; agents and executors ask it for each job's owner.
func (s *Store) UnixName(ctx context.Context, name string) (string, error) {
	u, err := s.UserByName(ctx, name)
	if err != nil {
		return "", fmt.Errorf("unix name of %s: %w", name, err)
	}
	return unixName(u), nil
}

// UnixNames is UnixName for many users in one query: the Unix account of
// each user named. A name with no user (an account since removed) maps to
// itself, as a login name with no account set does.
func (s *Store) UnixNames(ctx context.Context, names []string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = n
	}
	if len(names) == 0 {
		return out, nil
	}
	var us []User
	if err := s.db.WithContext(ctx).Select("name", "unix_name").Where("name IN ?", names).Find(&us).Error; err != nil {
		return nil, fmt.Errorf("unix names of %d users: %w", len(names), err)
	}
	for i := range us {
		out[us[i].Name] = unixName(&us[i])
	}
	return out, nil
}

func unixName(u *User) string {
	if u.UnixName != "" {
		return u.UnixName
	}
	return u.Name
}

// SetUnixName records the Unix account of the user called name (an
// admin's choice). A directory attribute or identity provider claim, where
// one is configured, replaces it at the user's next sign-in.
func (s *Store) SetUnixName(ctx context.Context, name, unix string) error {
	if err := CheckUnixName(unix); err != nil {
		return fmt.Errorf("set unix name of %s: unix name %w: %w", name, err, ErrInvalid)
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		u, err := userByName(tx, name)
		if err != nil {
			return err
		}
		if err := tx.Model(u).Update("unix_name", unix).Error; err != nil {
			return fmt.Errorf("set unix name of %s: %w", name, err)
		}
		return nil
	})
}

// ExternalUser is who an identity source says signed in, and what the
// group mapping makes of their groups.
type ExternalUser struct {
	Source  string // SourceLDAP or SourceOIDC
	Subject string // the LDAP DN, or issuer and subject
	Name    string // the login name in the portal
	// UnixName, when not empty, is the Unix account the source names
	// (an LDAP attribute, an OIDC claim): it replaces the recorded one.
	UnixName string
	Role     Role
	Team     string
}

// ErrOtherSource is returned when an account of the same name signs in
// elsewhere (a local password, another source).
var ErrOtherSource = errors.New("an account of that name signs in elsewhere")

// SignIn is the outcome of SyncExternalUser.
type SignIn struct {
	User *User
	// Created: the account was made at this sign-in.
	Created bool
	// Changed lists what this sign-in changed ("team vision -> nlp"),
	// for the audit log; empty when nothing did.
	Changed []string
}

// SyncExternalUser records a sign-in through LDAP or OpenID Connect: it
// finds the account by its subject at the source (or, the first time, by
// name), creates it on first sign-in, and sets its role, team and Unix
// account from what the source said now, so that a group removed there
// takes its team or role away here. A team named by the mapping is made
// if missing (with no guarantee). An account of the same name that signs
// in elsewhere is refused with ErrOtherSource, unless it is local and
// linkLocal is set, when it is taken over by the source. A disabled
// account is refused with ErrDisabled.
func (s *Store) SyncExternalUser(ctx context.Context, x ExternalUser, linkLocal bool, now time.Time) (SignIn, error) {
	out, err := s.syncExternalUser(ctx, x, linkLocal, now)
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		// A first sign-in of the same person made the account meanwhile.
		out, err = s.syncExternalUser(ctx, x, linkLocal, now)
	}
	return out, err
}

func (s *Store) syncExternalUser(ctx context.Context, x ExternalUser, linkLocal bool, now time.Time) (SignIn, error) {
	var out SignIn
	if err := CheckName(x.Name); err != nil {
		return out, fmt.Errorf("sign in: name %w: %w", err, ErrInvalid)
	}
	if x.UnixName != "" {
		if err := CheckUnixName(x.UnixName); err != nil {
			return out, fmt.Errorf("sign in as %s: unix name from %s %w: %w", x.Name, x.Source, err, ErrInvalid)
		}
	}
	if !x.Role.Valid() || x.Role != RoleAdmin && x.Team == "" {
		return out, fmt.Errorf("sign in as %s: role %q team %q: %w", x.Name, x.Role, x.Team, ErrInvalid)
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		out = SignIn{}
		if x.Team != "" {
			if err := CheckName(x.Team); err != nil {
				return fmt.Errorf("sign in as %s: team name %w: %w", x.Name, err, ErrInvalid)
			}
			t := Team{Name: x.Team, Weight: 1, CreatedAt: now}
			if err := tx.Where(Team{Name: x.Team}).FirstOrCreate(&t).Error; err != nil {
				return fmt.Errorf("sign in as %s: ensure team %s: %w", x.Name, x.Team, err)
			}
		}
		var u User
		err := tx.Where("source = ? AND subject = ?", x.Source, x.Subject).First(&u).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			err = tx.Where("name = ?", x.Name).First(&u).Error
			switch {
			case errors.Is(err, gorm.ErrRecordNotFound):
				u = User{Name: x.Name, PasswordHash: externalPassword, Role: x.Role, Team: x.Team,
					UnixName: cmp.Or(x.UnixName, x.Name), Source: x.Source, Subject: x.Subject, CreatedAt: now}
				if err := tx.Create(&u).Error; err != nil {
					return fmt.Errorf("sign in as %s: create account: %w", x.Name, err)
				}
				out.User, out.Created = &u, true
				return nil
			case err != nil:
				return fmt.Errorf("sign in as %s: %w", x.Name, err)
			case u.Source == SourceLocal && linkLocal:
				out.Changed = append(out.Changed, fmt.Sprintf("source local -> %s", x.Source))
			default:
				return fmt.Errorf("sign in as %s through %s: the account %s signs in with %s: %w",
					x.Name, x.Source, u.Name, sourceWords(u.Source), ErrOtherSource)
			}
		} else if err != nil {
			return fmt.Errorf("sign in as %s: %w", x.Name, err)
		}
		if u.Disabled() {
			return fmt.Errorf("sign in as %s: %w", u.Name, ErrDisabled)
		}
		set := map[string]any{"source": x.Source, "subject": x.Subject, "password_hash": externalPassword}
		if u.Role != x.Role {
			out.Changed = append(out.Changed, fmt.Sprintf("role %s -> %s", u.Role, x.Role))
			set["role"] = x.Role
		}
		if u.Team != x.Team {
			out.Changed = append(out.Changed, fmt.Sprintf("team %q -> %q", u.Team, x.Team))
			set["team"] = x.Team
		}
		if x.UnixName != "" && x.UnixName != u.UnixName {
			out.Changed = append(out.Changed, fmt.Sprintf("unix name %q -> %q", u.UnixName, x.UnixName))
			set["unix_name"] = x.UnixName
		} else if u.UnixName == "" {
			set["unix_name"] = u.Name
		}
		if err := tx.Model(&u).Updates(set).Error; err != nil {
			return fmt.Errorf("sign in as %s: update account: %w", u.Name, err)
		}
		if err := tx.First(&u, u.ID).Error; err != nil {
			return fmt.Errorf("sign in as %s: %w", u.Name, err)
		}
		out.User = &u
		return nil
	})
	return out, err
}

// sourceWords says how an account of source signs in, for messages.
func sourceWords(source string) string {
	switch source {
	case SourceLDAP:
		return "the LDAP directory"
	case SourceOIDC:
		return "the identity provider"
	}
	return "a local password"
}

// UsersFrom lists the accounts that sign in through source, by name.
func (s *Store) UsersFrom(ctx context.Context, source string) ([]User, error) {
	var us []User
	if err := s.db.WithContext(ctx).Where("source = ?", source).Order("name").Find(&us).Error; err != nil {
		return nil, fmt.Errorf("list users from %s: %w", source, err)
	}
	return us, nil
}

// EndCredentials ends the sessions and API tokens of the user called
// name, and says how many there were.
func (s *Store) EndCredentials(ctx context.Context, name string) (ended int64, err error) {
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		u, err := userByName(tx, name)
		if err != nil {
			return err
		}
		var n, m int64
		if err := tx.Model(&Session{}).Where("user_id = ?", u.ID).Count(&n).Error; err != nil {
			return fmt.Errorf("count sessions of %s: %w", name, err)
		}
		if err := tx.Model(&APIToken{}).Where("user_id = ?", u.ID).Count(&m).Error; err != nil {
			return fmt.Errorf("count API tokens of %s: %w", name, err)
		}
		ended = n + m
		return endCredentials(tx, u)
	})
	return ended, err
}
