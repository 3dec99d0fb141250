package web

import (
	"context"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// migrated is the test servers' database: migrated once per test binary
// and copied for each server, instead of running every migration step
// for each (models' tests check the steps themselves).
var migrated = &modelstest.Template{Make: func(ctx context.Context, dsn string) error {
	s, err := models.OpenWith(ctx, dsn, models.Options{PasswordCost: bcrypt.MinCost})
	if err != nil {
		return err
	}
	return s.Close()
}}

func TestMain(m *testing.M) { migrated.Main(m) }
