package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/hub"
	"github.com/gpuportal/gpuportal/models"
)

// machineStore is the store as the agents' hub keeps machine identities
// (hub.MachineStore): models' errors become the hub's.
type machineStore struct {
	*models.Store
}

var _ hub.MachineStore = machineStore{}

// JoinToken returns the ID of an active join token.
func (s machineStore) JoinToken(ctx context.Context, token string, now time.Time) (int64, error) {
	t, err := s.JoinTokenFor(ctx, token, now)
	if err != nil {
		return 0, hubError(err)
	}
	return t.ID, nil
}

// CheckMachine checks a machine's credential.
func (s machineStore) CheckMachine(ctx context.Context, name, credential string, now time.Time) error {
	return hubError(s.Store.CheckMachine(ctx, name, credential, now))
}

// hubError adds to err the hub's error for models' ErrNotFound and
// ErrWrongCredential.
func hubError(err error) error {
	switch {
	case errors.Is(err, models.ErrNotFound):
		return fmt.Errorf("%w (%w)", err, hub.ErrNotFound)
	case errors.Is(err, models.ErrWrongCredential):
		return fmt.Errorf("%w (%w)", err, hub.ErrWrongCredential)
	}
	return err
}
