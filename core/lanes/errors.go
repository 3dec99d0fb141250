package lanes

import "errors"

// Errors the lane manager returns; test with errors.Is.
var (
	// ErrTooLarge: the job's padded P + E exceeds the GPU's capacity (or
	// every GPU's, for a Pool), so no amount of waiting lets it share.
	ErrTooLarge = errors.New("job larger than the GPU")
	// ErrNoRoom: the job does not fit on the GPU now.
	ErrNoRoom = errors.New("no room on the GPU")
	// ErrDraining comes with ErrNoRoom from Pool.Admit when the job would
	// fit by merging lanes that run iterations now: the pool stops
	// granting iterations in those lanes, and the job fits once all but
	// one have ended theirs (Finished.Retry says when to try again).
	ErrDraining = errors.New("draining lanes to merge them")
	// ErrDuplicate: a job with this ID is already admitted or waiting.
	ErrDuplicate = errors.New("job already known")
	// ErrUnknownJob: no job with this ID is admitted (or waiting).
	ErrUnknownJob = errors.New("unknown job")
	// ErrRunning: the job already runs an iteration.
	ErrRunning = errors.New("iteration already running")
	// ErrNotRunning: the job runs no iteration.
	ErrNotRunning = errors.New("no iteration running")
	// ErrExceedsLane: the job needs more ephemeral memory than its lane
	// holds; the caller stops it and submits it again with the estimate
	// that Finished.Requeue (or Tracker.Requeue) gives.
	ErrExceedsLane = errors.New("job exceeds its lane")
	// ErrHeld: the GPU is held exclusively outside the lane manager.
	ErrHeld = errors.New("GPU held exclusively")
	// ErrBusy: the GPU has lanes or a reservation and cannot be held.
	ErrBusy = errors.New("GPU in use by lanes")
	// ErrBadInput: a value out of range (negative memory, NaN time, ...).
	ErrBadInput = errors.New("bad input")
)
