//go:build !linux

package gate

import (
	"errors"
	"net"
)

// peerPID is not available here: Config.Authorize gets PID 0.
func peerPID(c *net.UnixConn) (int, error) {
	return 0, errors.New("peer credentials: not supported on this system")
}
