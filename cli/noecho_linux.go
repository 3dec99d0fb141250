package cli

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// withoutEcho runs f with terminal fd's echo off, then puts the terminal
// back as it was. Echo goes off before the prompt is written, so that
// what is typed the moment the prompt shows (or pasted ahead of it) is
// never echoed, as it could be between the prompt and term.ReadPassword.
func withoutEcho(fd int, f func() ([]byte, error)) ([]byte, error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("read the terminal's settings: %w", err)
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return nil, fmt.Errorf("turn the terminal's echo off: %w", err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old) //nolint:errcheck // best effort, as term.ReadPassword restores
	return f()
}
