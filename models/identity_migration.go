package models

import "gorm.io/gorm"

// v17User holds the columns step 17 adds to users: the Unix account a
// user's jobs run as, and where the account comes from (local, ldap,
// oidc) with its subject there (identity.go).
type v17User struct {
	UnixName string `gorm:"size:64;default:''"`
	Source   string `gorm:"size:16;default:'local'"`
	Subject  string `gorm:"size:512;default:''"`
}

func (v17User) TableName() string { return "users" }

// userIdentity adds the columns, gives every existing user the Unix
// account of their login name, and makes (source, subject) unique.
func userIdentity(tx *gorm.DB) error {
	if err := addColumns(tx, &v17User{}, "UnixName", "Source", "Subject"); err != nil {
		return err
	}
	if err := tx.Exec("UPDATE users SET unix_name = name WHERE unix_name = '' OR unix_name IS NULL").Error; err != nil {
		return err
	}
	if err := tx.Exec("UPDATE users SET source = 'local' WHERE source = '' OR source IS NULL").Error; err != nil {
		return err
	}
	// One account per person at a source, even when their first two
	// sign-ins race.
	return tx.Exec("CREATE UNIQUE INDEX IF NOT EXISTS idx_users_source_subject ON users (source, subject) WHERE subject <> ''").Error
}
