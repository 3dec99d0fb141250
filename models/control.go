package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Account control: what an admin does to another user's account. Each
// change ends what it must in the store, in one transaction; the web
// server ends the user's live connections (web/sockets.go), and every
// replica's next look-up of a session or token sees the change.

// DisableUser disables the account name on behalf of admin: it can no
// longer log in, its sessions end, its API tokens are refused (they work
// again if the account is enabled) and its waiting jobs are held, saying
// why; running jobs run on, and are held if they are put back in the
// queue. It returns how many waiting jobs it held. Disabling a disabled
// account changes nothing.
func (s *Store) DisableUser(ctx context.Context, name, admin string, now time.Time) (held int, err error) {
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		u, err := userByName(tx, name)
		if err != nil {
			return err
		}
		if u.Disabled() {
			return nil
		}
		err = tx.Model(u).Updates(map[string]any{"disabled_at": now, "disabled_by": admin}).Error
		if err != nil {
			return fmt.Errorf("disable %s: %w", name, err)
		}
		if err := tx.Where("user_id = ?", u.ID).Delete(&Session{}).Error; err != nil {
			return fmt.Errorf("end sessions of %s: %w", name, err)
		}
		held, err = holdJobs(tx, name, fmt.Sprintf("held: the account of %s was disabled by %s; it waits until the account is enabled again, or is cancelled", name, admin), now)
		return err
	})
	return held, err
}

// EnableUser enables the disabled account name again and releases the
// jobs its disabling held. It returns how many waiting jobs it released.
func (s *Store) EnableUser(ctx context.Context, name string, now time.Time) (released int, err error) {
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		u, err := userByName(tx, name)
		if err != nil {
			return err
		}
		if !u.Disabled() {
			return nil
		}
		err = tx.Model(u).Updates(map[string]any{"disabled_at": nil, "disabled_by": ""}).Error
		if err != nil {
			return fmt.Errorf("enable %s: %w", name, err)
		}
		var js []Job
		if err := tx.Where("\"user\" = ? AND state IN ? AND hold_reason <> ''", name, UnfinishedStates).Find(&js).Error; err != nil {
			return fmt.Errorf("jobs of %s: %w", name, err)
		}
		for i := range js {
			j := &js[i]
			j.HoldReason = ""
			if !j.State.Waiting() {
				if err := tx.Model(j).Update("hold_reason", "").Error; err != nil {
					return fmt.Errorf("release job %d: %w", j.ID, err)
				}
				continue
			}
			j.Reason = fmt.Sprintf("released: the account of %s was enabled again", name)
			if err := tx.Model(j).Updates(map[string]any{"hold_reason": "", "reason": j.Reason}).Error; err != nil {
				return fmt.Errorf("release job %d: %w", j.ID, err)
			}
			if err := addEvent(tx, j, now); err != nil {
				return err
			}
			released++
		}
		return nil
	})
	return released, err
}

// DeleteUser deletes the account name: its sessions, API tokens, job
// templates, caps and notifications go with it. Its jobs stay, as history; the waiting
// ones are held, saying why, until an admin cancels them. It returns how
// many waiting jobs it held.
func (s *Store) DeleteUser(ctx context.Context, name, admin string, now time.Time) (held int, err error) {
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		u, err := userByName(tx, name)
		if err != nil {
			return err
		}
		if err := endCredentials(tx, u); err != nil {
			return err
		}
		if err := tx.Where("\"user\" = ?", name).Delete(&JobTemplate{}).Error; err != nil {
			return fmt.Errorf("delete templates of %s: %w", name, err)
		}
		if err := tx.Where("\"user\" = ?", name).Delete(&UserCap{}).Error; err != nil {
			return fmt.Errorf("delete caps of %s: %w", name, err)
		}
		if err := deleteNotifications(tx, u.ID); err != nil {
			return err
		}
		if err := tx.Delete(u).Error; err != nil {
			return fmt.Errorf("delete user %s: %w", name, err)
		}
		held, err = holdJobs(tx, name, fmt.Sprintf("held: the account of %s was deleted by %s; an admin may cancel it", name, admin), now)
		return err
	})
	return held, err
}

// holdJobs holds user's unfinished jobs for reason: the waiting ones at
// once (their reason and history say so), the running ones if they are
// put back in the queue. It returns how many waiting jobs it held.
func holdJobs(tx *gorm.DB, user, reason string, now time.Time) (int, error) {
	var js []Job
	if err := tx.Where("\"user\" = ? AND state IN ?", user, UnfinishedStates).Find(&js).Error; err != nil {
		return 0, fmt.Errorf("jobs of %s: %w", user, err)
	}
	held := 0
	for i := range js {
		j := &js[i]
		j.HoldReason = reason
		if !j.State.Waiting() {
			if err := tx.Model(j).Update("hold_reason", reason).Error; err != nil {
				return held, fmt.Errorf("hold job %d: %w", j.ID, err)
			}
			continue
		}
		j.Reason = reason
		if err := tx.Model(j).Updates(map[string]any{"hold_reason": reason, "reason": reason}).Error; err != nil {
			return held, fmt.Errorf("hold job %d: %w", j.ID, err)
		}
		if err := addEvent(tx, j, now); err != nil {
			return held, err
		}
		held++
	}
	return held, nil
}

// UserTokens lists the unexpired API tokens of the user called name,
// newest first: names and dates, never secrets.
func (s *Store) UserTokens(ctx context.Context, name string, now time.Time) ([]APIToken, error) {
	u, err := s.UserByName(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.APITokens(ctx, u.ID, now)
}

// RevokeUserToken deletes API token id of the user called name.
func (s *Store) RevokeUserToken(ctx context.Context, name string, id int64) error {
	u, err := s.UserByName(ctx, name)
	if err != nil {
		return err
	}
	return s.RevokeAPIToken(ctx, u.ID, id)
}

// SessionUsers returns, by token hash (HashToken), the users of those of
// hashes that are unexpired sessions of enabled accounts: live
// connections check their credential with it, many at once.
func (s *Store) SessionUsers(ctx context.Context, hashes []string, now time.Time) (map[string]User, error) {
	var rows []Session
	err := s.db.WithContext(ctx).Where("token_hash IN ? AND expires_at > ?", hashes, now).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("check sessions: %w", err)
	}
	byUser := make(map[string]int64, len(rows))
	for _, r := range rows {
		byUser[r.TokenHash] = r.UserID
	}
	return s.usersByID(ctx, byUser)
}

// TokenUsers is SessionUsers for API tokens.
func (s *Store) TokenUsers(ctx context.Context, hashes []string, now time.Time) (map[string]User, error) {
	var rows []APIToken
	err := s.db.WithContext(ctx).Where("token_hash IN ? AND expires_at > ?", hashes, now).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("check API tokens: %w", err)
	}
	byUser := make(map[string]int64, len(rows))
	for _, r := range rows {
		byUser[r.TokenHash] = r.UserID
	}
	return s.usersByID(ctx, byUser)
}

// usersByID maps each key to the enabled user of its ID.
func (s *Store) usersByID(ctx context.Context, ids map[string]int64) (map[string]User, error) {
	out := make(map[string]User, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list := make([]int64, 0, len(ids))
	for _, id := range ids {
		list = append(list, id)
	}
	var us []User
	if err := s.db.WithContext(ctx).Where("id IN ? AND disabled_at IS NULL", list).Find(&us).Error; err != nil {
		return nil, fmt.Errorf("read users: %w", err)
	}
	byID := make(map[int64]User, len(us))
	for _, u := range us {
		byID[u.ID] = u
	}
	for k, id := range ids {
		if u, ok := byID[id]; ok {
			out[k] = u
		}
	}
	return out, nil
}

// AllAPITokens lists every user's unexpired API tokens, by user ID,
// newest first: names and dates, never secrets.
func (s *Store) AllAPITokens(ctx context.Context, now time.Time) (map[int64][]APIToken, error) {
	var ts []APIToken
	if err := s.db.WithContext(ctx).Where("expires_at > ?", now).Order("id DESC").Find(&ts).Error; err != nil {
		return nil, fmt.Errorf("list API tokens: %w", err)
	}
	out := make(map[int64][]APIToken)
	for _, t := range ts {
		out[t.UserID] = append(out[t.UserID], t)
	}
	return out, nil
}
