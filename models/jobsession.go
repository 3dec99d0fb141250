package models

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/core/job"
)

// IsSession reports whether the job is an interactive session.
func (j *Job) IsSession() bool { return j.SessionType != "" }

// sealedPrefix marks a session's stored secret as a salt to derive from;
// a secret without it was stored in clear by an earlier version
// (sealLegacySessions).
const sealedPrefix = "k1."

// NewSessionSalt returns what a new session stores in jobs.session_secret:
// a random salt, not itself a secret without the key.
func NewSessionSalt() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("session salt: %w", err)
	}
	return sealedPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// sessionSecrets returns the secret of j's session URL and the token the
// proxy presents to it: derived from the key and the job's salt, or as
// stored in clear by an earlier version for a session that was running
// when the server was upgraded.
func (s *Store) sessionSecrets(j *Job) (secret, token string) {
	salt, sealed := strings.CutPrefix(j.SessionSecret, sealedPrefix)
	if !sealed {
		return j.SessionSecret, j.SessionToken
	}
	id := strconv.FormatInt(j.ID, 10)
	enc := base64.RawURLEncoding.EncodeToString
	return enc(s.sessionKey.derive("session url", id, salt)), enc(s.sessionKey.derive("session token", id, salt))
}

// SessionPrefix is the path the portal serves j's session under,
// /sessions/ID/SECRET/; empty for a batch job.
func (s *Store) SessionPrefix(j *Job) string {
	if !j.IsSession() {
		return ""
	}
	secret, _ := s.sessionSecrets(j)
	return SessionPath(j.ID, secret)
}

// SessionPath is the path of job id's session whose URL secret is secret.
func SessionPath(id int64, secret string) string {
	return "/sessions/" + strconv.FormatInt(id, 10) + "/" + secret + "/"
}

// SessionToken is the credential the portal's proxy presents to j's
// session; never shown to anyone.
func (s *Store) SessionToken(j *Job) string {
	_, token := s.sessionSecrets(j)
	return token
}

// JobSession is j's session as machines start it; nil for a batch job.
func (s *Store) JobSession(j *Job) *job.Session {
	if !j.IsSession() {
		return nil
	}
	return &job.Session{Type: job.SessionType(j.SessionType), Port: j.SessionPort, BaseURL: s.SessionPrefix(j), Token: s.SessionToken(j)}
}

// sealLegacySessions takes out of the database the session secrets an
// earlier version stored in clear: every session's that is not running
// is replaced by a salt (one for all: the job's ID sets each apart), so
// a waiting one starts with derived secrets. A running session keeps its
// own until it ends (its process holds its token); a later start seals
// it.
func (s *Store) sealLegacySessions(ctx context.Context) error {
	salt, err := NewSessionSalt()
	if err != nil {
		return err
	}
	err = s.db.WithContext(ctx).Model(&Job{}).
		Where("session_type <> '' AND session_secret NOT LIKE ? AND state <> ?", sealedPrefix+"%", job.Running).
		Updates(map[string]any{"session_secret": salt, "session_token": ""}).Error
	if err != nil {
		return fmt.Errorf("seal session secrets: %w", err)
	}
	return nil
}

// UserSessions lists user's interactive sessions (jobs with a session
// type), newest first, at most limit of them.
func (s *Store) UserSessions(ctx context.Context, user string, limit int) ([]Job, error) {
	var js []Job
	err := s.db.WithContext(ctx).Where("\"user\" = ? AND session_type <> ''", user).Order("id DESC").Limit(limit).Find(&js).Error
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", user, err)
	}
	return js, nil
}
