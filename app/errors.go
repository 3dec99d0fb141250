package app

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Kind is what kind of failure an action's error is, the one thing a
// front end needs to answer it (web maps each to an HTTP status in one
// place).
type Kind int

// The kinds of failure an action reports.
const (
	// NotFound: no such object, or one the actor may not see (the same
	// answer, so that nobody can probe what other teams hold).
	NotFound Kind = iota + 1
	// Forbidden: the actor sees the object but may not do this to it.
	Forbidden
	// Invalid: the request is wrong; Field names the field at fault.
	Invalid
	// Conflict: the object is not in a state that allows the action.
	Conflict
	// Unavailable: the store cannot save now; nothing was changed.
	Unavailable
	// Unprocessable: the request is well formed but names nothing to
	// act on (a what-if window without jobs); Field names what to change.
	Unprocessable
	// TooLarge: what the request carries or asks for is over a limit,
	// which the message names (an upload, an archive).
	TooLarge
)

// String names k, for logs.
func (k Kind) String() string {
	switch k {
	case NotFound:
		return "not found"
	case Forbidden:
		return "forbidden"
	case Invalid:
		return "invalid"
	case Conflict:
		return "conflict"
	case Unavailable:
		return "unavailable"
	case Unprocessable:
		return "unprocessable"
	case TooLarge:
		return "too large"
	}
	return fmt.Sprintf("kind %d", int(k))
}

// Error is an action's refusal: its kind and a message a person can act
// on. An invalid request names its field (Field, or Fields for a
// submission checked field by field).
type Error struct {
	Kind Kind
	// Field is the field at fault of an invalid request ("hours",
	// "gpus"); empty otherwise.
	Field string
	// Msg says what is wrong, as a client reads it; an invalid
	// request's begins with the field's name.
	Msg string
	// Fields are every field at fault of a submission, for a form that
	// marks them all; nil otherwise.
	Fields FieldErrors
	// Err is the cause (a store error), for errors.Is and the log.
	Err error
	// store marks the store's failure (stored): only then does Err's
	// cause say the store cannot save. An action's own refusal may carry
	// a network error or a deadline of something else (a machine's files
	// helper, a what-if replay), which is no database outage.
	store bool
}

// Error is the message as a client reads it.
func (e *Error) Error() string { return e.Msg }

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

// KindOf is err's kind; 0 when err is no *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

func notFound(what string, id int64) error {
	// The one answer for a job (or array) that does not exist and for
	// one of a team the actor may not see.
	return &Error{Kind: NotFound, Msg: fmt.Sprintf("no such %s: %d", what, id)}
}

func forbidden(format string, args ...any) error {
	return &Error{Kind: Forbidden, Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &Error{Kind: Conflict, Msg: fmt.Sprintf(format, args...)}
}

// invalid is a request whose field is wrong; the message (format)
// begins with the field's name.
func invalid(field, format string, args ...any) error {
	return &Error{Kind: Invalid, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// invalidFields is a submission refused field by field.
func invalidFields(fe FieldErrors) error {
	field := fe.firstField()
	return &Error{Kind: Invalid, Field: field, Msg: fe.First(), Fields: fe}
}

// FieldErrors maps a field name to what is wrong with it.
type FieldErrors map[string]string

// fieldOrder is the order in which a submission's fields are named when
// one is (First): the order of the form.
var fieldOrder = []string{"name", "team", "session", "priority", "gpus", "session.type", "session.port", "command", "image", "sim", "sim.duration_s", "model", "gpu_mem_gb", "sharing", "gpu_fraction", "mem_persistent_mib", "mem_ephemeral_mib", "batch_size", "parameters",
	"cpu_profile", "cpu_profile.family", "cpu_profile.cpu_curve", "cpu_profile.mem_curve",
	"env", "workdir", "time_limit", "retries", "dependencies", "array", "array_params"}

// firstField is the field First names.
func (fe FieldErrors) firstField() string {
	for _, k := range fieldOrder {
		if _, ok := fe[k]; ok {
			return k
		}
	}
	if keys := slices.Sorted(maps.Keys(fe)); len(keys) > 0 {
		return keys[0]
	}
	return ""
}

// First returns one error message naming its field, for APIs that
// return one.
func (fe FieldErrors) First() string {
	if k := fe.firstField(); k != "" {
		return k + ": " + fe[k]
	}
	return ""
}
