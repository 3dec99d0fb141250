package models

import (
	"context"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/models/modelstest"
)

// migrated is a database migrated once per test binary and copied for
// each test that asks for one, so that only the tests of the migrations
// (migrate_test.go) and of what opening an empty database does run every
// step. Migrated is the same for the package's external tests.
var migrated = &modelstest.Template{Make: func(ctx context.Context, dsn string) error {
	s, err := OpenWith(ctx, dsn, Options{PasswordCost: bcrypt.MinCost})
	if err != nil {
		return err
	}
	return s.Close()
}}

// Migrated is migrated, for the external tests (package models_test).
var Migrated = migrated

func TestMain(m *testing.M) { migrated.Main(m) }
