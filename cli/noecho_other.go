//go:build !linux

package cli

// withoutEcho runs f: elsewhere than Linux, term.ReadPassword alone turns
// the echo off, once the prompt is written.
func withoutEcho(_ int, f func() ([]byte, error)) ([]byte, error) { return f() }
