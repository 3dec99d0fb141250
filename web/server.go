// Package web is gpuportal's HTTP face: the portal's pages, the JSON API
// under /api/v1, authentication, CSRF protection and /metrics.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/identity"
	"github.com/gpuportal/gpuportal/identity/ldapdir"
	"github.com/gpuportal/gpuportal/identity/openid"
	"github.com/gpuportal/gpuportal/live"
	"github.com/gpuportal/gpuportal/outbound"
	"github.com/gpuportal/gpuportal/static"
)

// Config sets up a Server.
type Config struct {
	// App runs the actions and reads the handlers call (package app);
	// the server assembly builds it over the store and the engine.
	App *app.App
	// AccessChanged, when not nil, is signalled (app.Config.AccessChanged)
	// after a change that ends or narrows someone's access: every live
	// connection's credential and topics are checked again at once.
	AccessChanged <-chan struct{}
	// Telemetry holds the GPU history the charts and the GPU API show.
	Telemetry *telemetry.Recorder
	Logger    *slog.Logger
	// DevToken, when set, is an admin API token (development only).
	DevToken string
	// SecureCookies marks cookies Secure: set it when served over HTTPS.
	SecureCookies bool
	// TrustedProxies are the proxies whose X-Forwarded-For header names
	// the client. Without any, the header is ignored: the client is the
	// peer address, so that nobody can forge their address in the audit
	// log or around the login limit.
	TrustedProxies []*net.IPNet
	Now            func() time.Time
	// Agents is where remote node agents connect (core/agent/hub.Hub),
	// mounted at wire.Path on the leader; nil: remote agents are off.
	Agents Agents
	// Leader reports whether this replica schedules (see leader.go); nil
	// means it always does, as a lone server does.
	Leader func() bool
	// SocketRecheck is how often live connections' credentials and
	// topics are checked again (sockets.go); default 2s.
	SocketRecheck time.Duration
	// SocketMaxAge is how long a live connection may last before the
	// client must reconnect and authenticate again; default 1h.
	SocketMaxAge time.Duration
	// Live gives the frames of the live stream (live.Publisher), which
	// Run sends to the followers of each topic; nil: topics get their
	// snapshots and no updates.
	Live LiveFrames
	// MaxSocketsPerUser caps one user's live connections; default 16.
	MaxSocketsPerUser int
	// DataDir is the folder of job output (and, with SQLite, the
	// database): readiness checks that it takes a file. Empty: not checked.
	DataDir string
	// MaxConnsPerAddr caps the connections one client address holds at
	// once (LimitConnections); 0 is the default, 128; negative: no cap.
	MaxConnsPerAddr int
	// Notifier delivers users' notifications (package notify); the test
	// button wakes it. nil: tests wait for its next poll.
	Notifier interface{ Wake() }
	// Collectors are more metrics for /metrics (the notifier's).
	Collectors []prometheus.Collector
	// MetricsToken, when set, is the bearer token /metrics requires
	// (serve --metrics-token-file); empty: /metrics is anonymous.
	MetricsToken string
	// MetricsUserLabels puts users' names and job IDs in /metrics'
	// per-GPU labels even without a token (serve --metrics-user-labels):
	// the operator protects /metrics otherwise. With a token they are
	// always there.
	MetricsUserLabels bool
	// EmailEnabled: the server sends email (serve --smtp-addr).
	EmailEnabled bool
	// Webhooks is where users' webhooks may go (serve --webhook-allow,
	// with this server's own addresses): a webhook URL whose host is an
	// address it refuses is refused when saved. nil: the Internet's
	// addresses only.
	Webhooks *outbound.Policy
	// SignIn configures sign-in through the lab's LDAP directory or
	// OpenID Connect provider, and how groups map to teams and roles
	// (identity.Flags.Load); the zero value: local accounts only.
	SignIn identity.Config
	// AccountingIdleBelowPct is the GPU utilization, in percent, under
	// which an allocated GPU counts idle in accounting; 0 is the
	// default, DefaultIdleBelowPct. One threshold for every team, not
	// each team's own: the report compares teams and days with one ruler.
	AccountingIdleBelowPct float64
	// SessionOrigin is where interactive sessions are served, one host
	// each: a pattern such as https://*.sessions.lab.example
	// (sessionorigin.go). Empty: on the portal's origin, sandboxed.
	SessionOrigin string
	// PortalURL is the portal's own address (serve --public-url), where
	// a session's host sends browsers back; needed with SessionOrigin.
	PortalURL string
}

// Server serves the portal and the API.
type Server struct {
	cfg    Config
	echo   *echo.Echo
	logins *throttle // failed logins
	hub    *hub      // websocket clients
	// refusedConns counts connections closed for the per-address cap.
	refusedConns atomic.Int64
	scale        scaleStats // the live stream and history at scale (metrics_scale.go)
	readiness    readiness
	db           dbState            // the database's reachability (dbstate.go)
	ldap         *ldapdir.Directory // nil: no LDAP sign-in
	oidc         *openid.Provider   // nil: no OpenID Connect sign-in
	// reclaimed counts the GPU-seconds of idle jobs reclaimed, by team
	// (reclaim.go).
	reclaimed *prometheus.CounterVec
	// whatIfSlot holds a token while a what-if replay runs: one at a
	// time (whatif.go).
	whatIfSlot chan struct{}
	// sessions proxies interactive sessions (sessions.go).
	sessions *sessionProxy
	// crossOrigin tells a browser's cross-site request (csrf.go).
	crossOrigin *http.CrossOriginProtection
	// app runs the actions the handlers call (package app).
	app *app.App
}

// LiveFrames gives the frames of the live stream; *live.Publisher is one.
type LiveFrames interface {
	Frames() <-chan live.Frame
}

// Agents is the endpoint where remote node agents connect, with what
// /metrics says of them. core/agent/hub.Hub implements it.
type Agents interface {
	http.Handler
	// Heartbeats counts the heartbeats received from agents.
	Heartbeats() int64
	// HeartbeatAges says, per machine run by a remote agent, how long ago
	// its agent's last heartbeat came.
	HeartbeatAges(now time.Time) map[string]time.Duration
	// CheckpointCopies are the figures of the server's copies of jobs'
	// checkpoint folders.
	CheckpointCopies() job.CheckpointCopyStats
}

// sessionTTL is how long a login lasts.
const sessionTTL = 7 * 24 * time.Hour

// tokenTTL is how long an API token from POST /api/v1/tokens lasts.
const tokenTTL = 30 * 24 * time.Hour

// New builds the server's routes.
func New(cfg Config) (*Server, error) {
	if cfg.App == nil || cfg.Telemetry == nil {
		return nil, errors.New("web: the application layer and telemetry are required")
	}
	cfg = cfg.withDefaults()
	a, err := newAssets(static.FS)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, echo: echo.New(), logins: newThrottle(), hub: newHub(cfg.Logger), whatIfSlot: make(chan struct{}, 1),
		crossOrigin: http.NewCrossOriginProtection(),
		reclaimed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpuportal_reclaimed_idle_gpu_seconds_total",
			Help: "GPU-seconds given back by reclaiming idle jobs: each reclaimed job's GPUs times how long it had been idle, by team."}, []string{"team"})}
	s.app = cfg.App
	s.hub.poked = cfg.AccessChanged
	if s.ldap, s.oidc, err = identitySources(cfg.SignIn); err != nil {
		return nil, err
	}
	s.useMiddleware(a)

	e := s.echo
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	s.mountMetrics()
	e.GET("/static/*", a.serve)
	e.GET("/favicon.ico", a.favicon)
	e.GET(wire.Path, echo.WrapHandler(s.agentsOnLeader(s.agents())))
	e.GET(wire.TunnelPath, echo.WrapHandler(s.agentsOnLeader(s.agents())))
	e.GET(wire.CheckpointPath, echo.WrapHandler(s.agentsOnLeader(s.agents())))
	// Interactive sessions, proxied (sessions.go): every method, checked
	// on every request.
	if s.sessions, err = newSessionProxy(s, a); err != nil {
		return nil, err
	}
	e.Match(sessionMethods, "/sessions/:id/:secret/*", s.sessions.servePortal, s.loadSessionUser, s.loadBearerUser)
	e.GET("/sessions/:id/:secret", sessionSlash)

	e.GET("/ws", s.ws, s.requireAnyUser)
	s.apiRoutes()
	s.pageRoutes()
	return s, nil
}

// withDefaults is cfg with the defaults of what it leaves unset.
func (cfg Config) withDefaults() Config {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SocketRecheck <= 0 {
		cfg.SocketRecheck = defaultSocketRecheck
	}
	if cfg.SocketMaxAge <= 0 {
		cfg.SocketMaxAge = defaultSocketMaxAge
	}
	if cfg.MaxSocketsPerUser <= 0 {
		cfg.MaxSocketsPerUser = defaultMaxSocketsPerUser
	}
	if cfg.MaxConnsPerAddr == 0 {
		cfg.MaxConnsPerAddr = defaultMaxConnsPerAddr
	}
	return cfg
}

// useMiddleware sets what every request goes through: the client's
// address, errors, recovery, logging, body limits, compression, asset
// URLs and the security headers.
func (s *Server) useMiddleware(a *assets) {
	e, cfg := s.echo, s.cfg
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = echo.ExtractIPDirect()
	if len(cfg.TrustedProxies) > 0 {
		opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range cfg.TrustedProxies {
			opts = append(opts, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(opts...)
	}
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.Recover())
	e.Use(s.logRequests)
	e.Use(s.dataAge)
	e.Use(limitBody)
	e.Use(middleware.GzipWithConfig(middleware.GzipConfig{
		// Websockets are upgraded, not compressed here; /metrics
		// compresses itself.
		Skipper: func(c echo.Context) bool {
			p := c.Request().URL.Path
			return p == "/ws" || p == wire.Path || p == wire.TunnelPath || p == wire.CheckpointPath || p == "/metrics" || strings.HasPrefix(p, "/sessions/") ||
				strings.Contains(p, "/files/content") || strings.Contains(p, "/files/archive") // as they are
		},
		MinLength: 1024,
	}))
	e.Use(a.withAssetURLs)
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection: "0", ContentTypeNosniff: "nosniff", XFrameOptions: "DENY",
		ReferrerPolicy: "same-origin",
	}))
	e.Use(portalPolicy)
}

// mountMetrics serves /metrics: the portal's collectors and the
// server assembly's.
func (s *Server) mountMetrics() {
	e, cfg := s.echo, s.cfg
	reg := prometheus.NewRegistry()
	reg.MustRegister(collector{s: s})
	reg.MustRegister(leaderGauges(s)...)
	reg.MustRegister(limitMetrics(s)...)
	reg.MustRegister(scaleMetrics(s)...)
	reg.MustRegister(cfg.Collectors...)
	reg.MustRegister(s.reclaimed)
	// A collector that fails (the database is out) leaves its series
	// out; the others, from memory, are still served (dbstate.go).
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)})), s.metricsAuth())
}

// apiRoutes are the REST API's routes, /api/v1.
func (s *Server) apiRoutes() {
	e := s.echo
	v1 := e.Group("/api/v1", checkInputText)
	v1.POST("/tokens", s.apiCreateToken)
	v1.GET("/openapi.json", s.apiOpenAPI)
	v1.GET("/version", s.apiVersion)
	authed := v1.Group("", s.requireAPIUser)
	authed.GET("/jobs", s.apiListJobs)
	authed.POST("/jobs", s.apiSubmit)
	authed.GET("/jobs/:id", s.apiGetJob)
	authed.DELETE("/jobs/:id", s.apiCancel)
	authed.POST("/jobs/:id/keep-alive", s.apiKeepAlive)
	authed.POST("/jobs/:id/resubmit", s.apiResubmit)
	authed.GET("/arrays/:id", s.apiGetArray)
	authed.DELETE("/arrays/:id", s.apiCancelArray)
	authed.GET("/me", s.apiMe)
	authed.GET("/me/notifications", s.apiNotifications)
	authed.PUT("/me/notifications", s.apiSetNotifications)
	authed.POST("/me/notifications/test", s.apiTestNotification)
	authed.DELETE("/tokens/current", s.apiRevokeCurrentToken)
	authed.GET("/templates", s.apiTemplates)
	authed.POST("/templates", s.apiCreateTemplate)
	authed.DELETE("/templates/:id", s.apiDeleteTemplate)
	authed.GET("/gpus", s.apiGPUs)
	authed.GET("/gpus/history", s.apiGPUsHistory)
	authed.GET("/gpus/:uuid/history", s.apiGPUHistory)
	authed.GET("/cluster/history", s.apiClusterHistory)
	authed.GET("/queues", s.apiQueues)
	authed.GET("/nodes", s.apiNodes)
	authed.GET("/teams", s.apiTeams)
	authed.GET("/teams/:name", s.apiTeam)
	authed.PATCH("/teams/:name", s.apiSetShare, requireAdminTo(app.AdminsSetShare))
	authed.PUT("/teams/:name/caps/:user", s.apiSetCap)
	authed.PUT("/teams/:name/time-limits", s.apiSetTimeLimits)
	authed.PUT("/teams/:name/idle-policy", s.apiSetIdlePolicy)
	authed.PUT("/teams/:name/session-policy", s.apiSetSessionPolicy)
	authed.PUT("/teams/:name/batch-policy", s.apiSetBatchPolicy)
	authed.POST("/nodes/:name/drain", s.apiNodeAction(app.DrainNode), requireAdminTo(app.AdminsActOnNodes))
	authed.POST("/nodes/:name/resume", s.apiNodeAction(app.ResumeNode), requireAdminTo(app.AdminsActOnNodes))
	authed.POST("/nodes/:name/cordon", s.apiNodeAction(app.CordonNode), requireAdminTo(app.AdminsActOnNodes))
	authed.POST("/nodes/:name/uncordon", s.apiNodeAction(app.UncordonNode), requireAdminTo(app.AdminsActOnNodes))
	authed.POST("/nodes/:name/gpus/:index/clear", s.apiClearGPU, requireAdminTo(app.AdminsClearGPU))
	authed.GET("/join-tokens", s.apiJoinTokens, requireAdmin)
	authed.POST("/join-tokens", s.apiCreateJoinToken, requireAdmin)
	authed.DELETE("/join-tokens/:id", s.apiRevokeJoinToken, requireAdmin)
	authed.GET("/users", s.apiUsers, requireAdmin)
	authed.GET("/users/:name/tokens", s.apiUserTokens, requireAdmin)
	authed.DELETE("/users/:name/tokens/:id", s.apiRevokeUserToken, requireAdmin)
	authed.POST("/users/:name/disable", s.apiAccountAction(app.DisableAccount), requireAdmin)
	authed.POST("/users/:name/enable", s.apiAccountAction(app.EnableAccount), requireAdmin)
	authed.DELETE("/users/:name", s.apiAccountAction(app.DeleteAccount), requireAdmin)
	authed.PUT("/users/:name/unix-name", s.apiSetUnixName, requireAdmin)
	authed.GET("/machines", s.apiMachines, requireAdmin)
	authed.DELETE("/machines/:name", s.apiRemoveMachine, requireAdmin)
	authed.GET("/jobs/:id/logs", s.apiJobLogs)
	authed.GET("/jobs/:id/history", s.apiJobHistory)
	authed.GET("/jobs/:id/usage", s.apiJobUsage)
	authed.GET("/accounting", s.apiAccounting)
	authed.GET("/stats/jct", s.apiJCT)
	authed.GET("/whatif", s.apiWhatIf, requireAdmin)
	authed.GET("/stats/estimates", s.apiEstimates)
	authed.GET("/jobs/:id/memory", s.apiJobMemory)
	authed.GET("/jobs/:id/files", s.apiJobFiles)
	authed.GET("/jobs/:id/files/content", s.jobFileContent)
	authed.GET("/jobs/:id/files/archive", s.jobFileArchive)
	authed.PUT("/jobs/:id/files/content", s.apiUploadJobFile)
}

// pageRoutes are the portal's pages, on the session cookie.
func (s *Server) pageRoutes() {
	e := s.echo
	pages := e.Group("", s.csrf, s.loadSessionUser, checkInputText)
	pages.GET("/login", s.loginPage)
	pages.POST("/login", s.login, s.sameSiteLogin)
	pages.GET("/login/oidc", s.oidcStart)
	pages.GET("/login/oidc/callback", s.oidcCallback)
	in := pages.Group("", s.requireSessionUser)
	in.POST("/logout", s.logout)
	in.GET("/", func(c echo.Context) error { return c.Redirect(http.StatusSeeOther, "/jobs") })
	in.GET("/jobs", s.jobsPage)
	in.GET("/jobs/rows", s.jobRows)
	in.GET("/jobs/new", s.submitPage)
	in.GET("/sessions", s.sessionsPage)
	in.POST("/jobs", s.submitForm)
	in.GET("/jobs/:id", s.jobPage)
	in.GET("/jobs/:id/live", s.jobLive)
	in.POST("/jobs/:id/cancel", s.cancelForm)
	in.POST("/jobs/:id/keep-alive", s.keepAliveForm)
	in.POST("/jobs/:id/resubmit", s.resubmitForm)
	in.GET("/arrays/:id", s.arrayPage)
	in.GET("/arrays/:id/live", s.arrayLive)
	in.POST("/arrays/:id/cancel", s.cancelArrayForm)
	in.GET("/cluster", s.clusterPage)
	in.GET("/cluster/live", s.clusterLive)
	// The charts' longer ranges, for pages: the API's handlers on the session.
	in.GET("/cluster/history", s.apiClusterHistory)
	in.GET("/cluster/gpus/history", s.apiGPUsHistory)
	in.GET("/cluster/gpus/:uuid/history", s.apiGPUHistory)
	in.GET("/jobs/:id/memory", s.apiJobMemory)
	in.GET("/jobs/:id/usage", s.apiJobUsage)
	in.GET("/jobs/:id/logs", s.apiJobLogs)
	in.GET("/jobs/:id/files", s.jobFilesPage)
	in.GET("/jobs/:id/files/checkpoints", s.jobCheckpointsPart)
	in.GET("/jobs/:id/files/content", s.jobFileContent)
	in.GET("/jobs/:id/files/archive", s.jobFileArchive)
	// An upload's body takes its time: given it before the form is read.
	// The form streams through to the machine (uploadFilesForm), so its
	// token and fields are checked as they come, not by reading it whole.
	e.POST("/jobs/:id/files/upload", s.uploadFilesForm, longBody, s.csrfStreamed, s.loadSessionUser, checkURLTextOnly, s.requireSessionUser)
	in.POST("/jobs/:id/template", s.saveTemplateForm)
	in.POST("/templates/:id/delete", s.deleteTemplateForm)
	in.POST("/cluster/nodes/:name/drain", s.nodeActionForm(app.DrainNode), requireAdminTo(app.AdminsActOnNodes))
	in.POST("/cluster/nodes/:name/resume", s.nodeActionForm(app.ResumeNode), requireAdminTo(app.AdminsActOnNodes))
	in.POST("/cluster/nodes/:name/cordon", s.nodeActionForm(app.CordonNode), requireAdminTo(app.AdminsActOnNodes))
	in.POST("/cluster/nodes/:name/uncordon", s.nodeActionForm(app.UncordonNode), requireAdminTo(app.AdminsActOnNodes))
	in.POST("/cluster/nodes/:name/gpus/:index/clear", s.clearGPUForm, requireAdminTo(app.AdminsClearGPU))
	in.GET("/accounting", s.accountingPage)
	in.GET("/teams", s.teamsPage)
	in.GET("/teams/:name", s.teamPage)
	in.GET("/teams/:name/flags", s.teamFlagsPart)
	in.POST("/teams/:name/share", s.shareForm, requireAdminTo(app.AdminsSetShare))
	in.POST("/teams/:name/caps", s.capForm)
	in.POST("/teams/:name/time-limits", s.timeLimitsForm)
	in.POST("/teams/:name/idle-policy", s.idlePolicyForm)
	in.POST("/teams/:name/session-policy", s.sessionPolicyForm)
	in.POST("/teams/:name/batch-policy", s.batchPolicyForm)
	in.GET("/queues", s.queuesPage)
	in.GET("/queues/live", s.queuesLive)
	in.GET("/tokens", s.tokensPage)
	in.GET("/notifications", s.notificationsPage)
	in.GET("/notifications/deliveries", s.notificationDeliveries)
	in.POST("/notifications", s.notificationsForm)
	in.POST("/notifications/test", s.testNotificationForm)
	in.POST("/tokens", s.createTokenForm)
	in.POST("/tokens/:id/revoke", s.revokeTokenForm)
	admin := in.Group("/admin", requireAdmin)
	admin.GET("", s.adminPage)
	admin.GET("/whatif", s.whatIfPage)
	admin.GET("/machines", s.adminMachinesPage)
	admin.POST("/machines/join-tokens", s.createJoinTokenForm)
	admin.POST("/machines/join-tokens/:id/revoke", s.revokeJoinTokenForm)
	admin.POST("/machines/:name/remove", s.removeMachineForm)
	admin.POST("/whatif", s.whatIfForm)
	admin.POST("/:action", s.adminAction)
}

// portalPagePolicy is the content security policy of the portal's own
// answers: scripts only from the portal itself, never framed, nothing
// loaded from elsewhere. Styles may be inline (a bar's width).
const portalPagePolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'"

// portalPolicy sends portalPagePolicy with every answer but a session's
// (sessions.go sends theirs).
func portalPolicy(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !strings.HasPrefix(c.Request().URL.Path, "/sessions/") {
			c.Response().Header().Set("Content-Security-Policy", portalPagePolicy)
		}
		return next(c)
	}
}

// Handler returns the server as an http.Handler.
func (s *Server) Handler() http.Handler {
	if s.sessions.host == nil {
		return s.echo
	}
	// Sessions' hosts are told apart by name (sessionorigin.go).
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.sessions.hostOf(r); ok {
			s.sessions.host.ServeHTTP(w, r)
			return
		}
		s.echo.ServeHTTP(w, r)
	})
}

// healthz says whether the server runs and reaches its database
// (liveness), and whether it can save (readiness, as /readyz): a full
// disk is not fixed by a restart, so it does not fail this check, but it
// is told.
func (s *Server) healthz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.app.Ping(ctx); err != nil {
		s.db.observe(err, s.cfg.Now())
		out := map[string]any{"status": "database unavailable", "ready": false}
		if cause := s.unreachableSince(); cause != "" {
			out["cause"] = cause
		}
		return c.JSON(http.StatusServiceUnavailable, out)
	}
	out := map[string]any{"status": "ok", "role": s.role(), "ready": true}
	if cause := s.ready(ctx); cause != "" {
		out["ready"], out["cause"] = false, cause
	}
	return c.JSON(http.StatusOK, out)
}

// logRequests logs each request with its status and duration. Query
// strings are left out: they may carry tokens (a session's grant); so is
// the secret in a session's path.
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		path := c.Request().URL.Path
		if path == "/healthz" || path == "/metrics" || strings.HasPrefix(path, "/static/") ||
			strings.HasSuffix(path, "/live") || strings.HasSuffix(path, "/rows") {
			return nil
		}
		if rest, ok := strings.CutPrefix(path, "/sessions/"); ok {
			// A session's secret stays out of the log.
			id, _, _ := strings.Cut(rest, "/")
			path = "/sessions/" + id + "/…"
		}
		s.cfg.Logger.Debug("request", "method", c.Request().Method, "path", path,
			"status", c.Response().Status, "duration", time.Since(start))
		return nil
	}
}

// handleError answers errors as JSON under /api/ and as a short page
// elsewhere. Unexpected errors are logged and shown without detail.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := http.StatusInternalServerError, "internal error"
	var he *echo.HTTPError
	var ae *app.Error
	if c2, m, ok := s.refuseForOutage(err, c); ok {
		code, msg = c2, m
	} else if app.StoreUnavailable(err) {
		code, msg = http.StatusServiceUnavailable, cannotSave
		c.Response().Header().Set("Retry-After", "60")
	} else if errors.As(err, &ae) {
		code, msg = appStatus(ae.Kind), ae.Msg
	} else if errors.As(err, &he) {
		code = he.Code
		if m, ok := he.Message.(string); ok {
			msg = m
		} else {
			msg = http.StatusText(code)
		}
	}
	if code >= 500 {
		s.cfg.Logger.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path,
			"cause", app.StoreCause(err), "err", err)
	}
	path := c.Request().URL.Path
	switch {
	case strings.HasPrefix(path, "/api/"):
		_ = c.JSON(code, api.Error{Error: msg})
	case strings.HasPrefix(path, "/static/") || c.Request().Header.Get("HX-Request") == "true":
		// Files and page fragments get the message alone.
		_ = c.String(code, msg)
	default:
		if err := s.renderError(c, code, msg); err != nil {
			s.cfg.Logger.Error("render error page", "path", path, "err", err)
		}
	}
}
