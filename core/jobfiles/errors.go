package jobfiles

import (
	"errors"
	"io/fs"
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

// FSError turns an error of the file system about path p of root into a
// refusal when it is one (missing, not allowed, out of the root), with a
// message that names p but no folder of the machine; other errors stay.
func FSError(root, p string, err error) error {
	var e *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Kind: NotFound, Msg: Where(root, p) + ": no such file or folder"}
	case errors.Is(err, fs.ErrPermission):
		return &Error{Kind: Denied, Msg: Where(root, p) + ": permission denied to the job's account"}
	case strings.Contains(err.Error(), "path escapes from parent"):
		// os.Root's refusal of a link that leads out of the root.
		return &Error{Kind: Denied, Msg: Where(root, p) + ": leads out of the folder (a link): refused"}
	case strings.Contains(err.Error(), "not a directory"):
		return &Error{Kind: Invalid, Msg: Where(root, p) + ": not a folder"}
	}
	return err
}

// Where names path p of root for messages: "job:checkpoint/x".
func Where(root, p string) string {
	if p == "." || p == "" {
		return root + ":/"
	}
	return root + ":" + p
}
