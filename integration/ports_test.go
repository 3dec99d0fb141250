package integration

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// handedOut holds the ports freePort has given in this test binary, so two
// parallel tests never get the same one.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort returns a port on 127.0.0.1 that nothing listens on, for a
// process the test starts later. It is drawn below the kernel's ephemeral
// range: a port the kernel handed out for :0 is handed out again to the
// next outgoing connection (Chromium, the database, a go build), which
// then holds it when the process comes to listen ("address already in
// use"); ports below the range are only ever taken by a listener.
func freePort(t *testing.T) int {
	t.Helper()
	lo := ephemeralLow()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		port := 10000 + rand.IntN(lo-10000)
		if handedOut.ports[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ln.Close()
		handedOut.ports[port] = true
		return port
	}
	t.Fatalf("no free port between 10000 and %d", lo)
	return 0
}

// freeAddr is freePort as host:port.
func freeAddr(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(freePort(t))
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 11000 {
		return 32768
	}
	return lo
}
