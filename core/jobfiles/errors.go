package jobfiles

import (
	"errors"
	"io/fs"
	"net/http"
	"strings"
)

// Kind is what kind of refusal an Error is.
type Kind string

// The kinds of refusal.
const (
	NotFound Kind = "not_found" // no such file or folder
	Invalid  Kind = "invalid"   // a bad path, a folder where a file was asked for
	Denied   Kind = "denied"    // the job's account may not, or the path leads out of its root
	TooLarge Kind = "too_large" // over an upload or archive limit
)

// Error is a refusal, with a message a person can act on.
type Error struct {
	Kind Kind   `json:"kind"`
	Msg  string `json:"error"`
}

func (e *Error) Error() string { return e.Msg }

// status is the HTTP status the server answers a refusal of kind k with.
func (k Kind) status() int {
	switch k {
	case NotFound:
		return http.StatusNotFound
	case Denied:
		return http.StatusForbidden
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// kindOf is the kind of refusal of status, for a reply without a body
// that says it.
func kindOf(status int) Kind {
	switch status {
	case http.StatusNotFound:
		return NotFound
	case http.StatusForbidden:
		return Denied
	case http.StatusRequestEntityTooLarge:
		return TooLarge
	}
	return Invalid
}

// fsError turns an error of the file system about path p of root into a
// refusal when it is one (missing, not allowed, out of the root), with a
// message that names p but no folder of the machine; other errors stay.
func fsError(root, p string, err error) error {
	var e *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Kind: NotFound, Msg: where(root, p) + ": no such file or folder"}
	case errors.Is(err, fs.ErrPermission):
		return &Error{Kind: Denied, Msg: where(root, p) + ": permission denied to the job's account"}
	case strings.Contains(err.Error(), "path escapes from parent"):
		// os.Root's refusal of a link that leads out of the root.
		return &Error{Kind: Denied, Msg: where(root, p) + ": leads out of the folder (a link): refused"}
	case strings.Contains(err.Error(), "not a directory"):
		return &Error{Kind: Invalid, Msg: where(root, p) + ": not a folder"}
	}
	return err
}

// where names path p of root for messages: "job:checkpoint/x".
func where(root, p string) string {
	if p == "." || p == "" {
		return root + ":/"
	}
	return root + ":" + p
}
