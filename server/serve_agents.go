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

// jobStates tells the hub which jobs have ended (their checkpoint copies
// go) and as whom a job runs.
type jobStates struct {
	*models.Store
}

var _ hub.JobStates = jobStates{}

// Ended returns those of ids that will never run again.
func (s jobStates) Ended(ctx context.Context, ids []int64) ([]int64, error) {
	return s.EndedAmong(ctx, ids)
}

// Account is the Unix account job id runs as: its owner's, as the
// engine gives it to the agents.
func (s jobStates) Account(ctx context.Context, id int64) (string, error) {
	j, err := s.Job(ctx, id)
	if err != nil {
		return "", err
	}
	// As the engine reads it (models.Store.UnixNames): a user since
	// removed runs as their login name.
	accounts, err := s.UnixNames(ctx, []string{j.User})
	if err != nil {
		return "", err
	}
	return accounts[j.User], nil
}
