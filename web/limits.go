package web

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// What one client may hold of the server (docs/operations.md, "Threat
// model"): the HTTP server's timeouts, connections per client address,
// live connections per user (sockets.go) and request bodies per route.
const (
	// readHeaderTimeout bounds the wait for a request's headers,
	// readTimeout for the whole request with its body, writeTimeout for
	// the answer, idleTimeout for a keep-alive connection's next request.
	// Websockets are free of them once upgraded: their own pings and
	// SocketRecheck bound them.
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 64 << 10
	// downloadTimeout bounds a whole job's output as a download, which
	// may be large.
	downloadTimeout = 30 * time.Minute

	defaultMaxConnsPerAddr = 128
	// defaultBodyLimit bounds request bodies; bodyLimits raises it for
	// the routes that take a job.
	defaultBodyLimit = 64 << 10
	jobBodyLimit     = 1 << 20
	sessionBodyLimit = 512 << 20
)

// bodyLimits are the routes whose bodies may exceed defaultBodyLimit.
var bodyLimits = map[string]int64{
	"POST /api/v1/jobs":      jobBodyLimit,
	"POST /jobs":             jobBodyLimit,
	"POST /api/v1/templates": jobBodyLimit,
	// Files uploaded to a session (a notebook, a data set).
	"POST /sessions/:id/:secret/*":  sessionBodyLimit,
	"PUT /sessions/:id/:secret/*":   sessionBodyLimit,
	"PATCH /sessions/:id/:secret/*": sessionBodyLimit,
	// A file uploaded into a job's files (files.go).
	"PUT /api/v1/jobs/:id/files/content": fileBodyLimit,
	"POST /jobs/:id/files/upload":        fileBodyLimit,
}

// HTTPServer returns an http.Server for the portal with its timeouts.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
}

// limitBody refuses a request whose body is over its route's limit: at
// once when it says its length, else when reading passes the limit.
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		limit, ok := bodyLimits[r.Method+" "+c.Path()]
		if !ok {
			limit = defaultBodyLimit
		}
		if r.ContentLength > limit {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("body: at most %d bytes", limit))
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		return next(c)
	}
}

// LimitConnections wraps ln so that one client address holds at most
// Config.MaxConnsPerAddr connections at once (websockets included):
// beyond it, a new connection from that address is closed as soon as it
// is accepted, so that one client cannot hold the server's connections,
// memory or file descriptors from others. Trusted proxies are not
// capped (their clients are many).
func (s *Server) LimitConnections(ln net.Listener) net.Listener {
	if s.cfg.MaxConnsPerAddr < 0 {
		return ln
	}
	return &connLimiter{Listener: ln, max: s.cfg.MaxConnsPerAddr, exempt: s.cfg.TrustedProxies,
		open: make(map[string]int), refused: &s.refusedConns}
}

// connLimiter is a listener that caps connections per client address.
type connLimiter struct {
	net.Listener
	max     int
	exempt  []*net.IPNet
	refused *atomic.Int64

	mu   sync.Mutex
	open map[string]int
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(c.RemoteAddr().String())
		if err != nil || l.isExempt(host) {
			return c, nil
		}
		l.mu.Lock()
		if l.open[host] >= l.max {
			l.mu.Unlock()
			l.refused.Add(1)
			_ = c.Close()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &countedConn{Conn: c, done: func() { l.release(host) }}, nil
	}
}

func (l *connLimiter) isExempt(host string) bool {
	ip := net.ParseIP(host)
	for _, n := range l.exempt {
		if ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

func (l *connLimiter) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[host]--; l.open[host] <= 0 {
		delete(l.open, host)
	}
}

// countedConn releases its place when closed, once.
type countedConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}

// limitMetrics reports the limits' refusals.
func limitMetrics(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gpuportal_connections_refused_total",
			Help: "Connections closed on arrival: their client address held --max-conns-per-addr already."},
			func() float64 { return float64(s.refusedConns.Load()) }),
	}
}
