package web

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/cmdline"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/templates"
)

// Interactive sessions (docs/portal.md, "Interactive sessions"): a
// session job's server listens on its machine's loopback interface, and
// the portal proxies HTTP and websockets to it at /sessions/ID/SECRET/...
// through the machine's agent (core/agent/hub/tunnel.go). Every request is
// checked: the viewer must be the session's owner, or an admin (audited);
// the portal's cookies and Authorization never reach the session, which
// gets its own token instead.

// withSessionURL adds the session's URL to aj for those who may open it
// (app.App.SessionURL).
func (s *Server) withSessionURL(u *app.User, j *app.Job, aj *api.Job) {
	if aj.Session != nil {
		aj.Session.URL = s.app.SessionURL(u, j)
	}
}

// sessionProxy forwards requests to sessions. It keeps one HTTP transport
// per run, so that a session's connections (tunnels) are reused.
type sessionProxy struct {
	s *Server
	// origin is where sessions are served (sessionorigin.go); nil: on
	// the portal's own origin, sandboxed.
	origin *sessionOrigin
	// portal is the portal's address, for the links and redirects of a
	// session's host back to it.
	portal string
	keys   *sessionKeys
	// host serves the sessions' hosts; nil without origin.
	host *echo.Echo

	mu         sync.Mutex
	transports map[job.RunRef]*http.Transport
	// opener opens sessions for those who may, auditing admins'.
	opener *app.SessionOpener
	// live are the requests being proxied (websockets, downloads), each
	// checked again with the live stream's clients (recheck).
	live map[*liveRequest]struct{}
}

// liveRequest is a request being proxied to a session, under the
// credential it came with.
type liveRequest struct {
	cred   credential
	job    int64
	run    int64
	cancel context.CancelFunc
}

// maxSessionTransports bounds the transports kept: past it, idle ones go.
const maxSessionTransports = 256

func newSessionProxy(s *Server, a *assets) (*sessionProxy, error) {
	p := &sessionProxy{s: s, keys: newSessionKeys(), portal: strings.TrimSuffix(s.cfg.PortalURL, "/"),
		transports: make(map[job.RunRef]*http.Transport), opener: s.app.SessionOpener(),
		live: make(map[*liveRequest]struct{})}
	if s.cfg.SessionOrigin == "" {
		s.cfg.Logger.Warn("sessions are served sandboxed on the portal's origin: Jupyter needs --session-origin (docs/operations.md, \"Sessions' own origin\")")
		return p, nil
	}
	o, err := parseSessionOrigin(s.cfg.SessionOrigin)
	if err != nil {
		return nil, fmt.Errorf("session origin: %w", err)
	}
	pu, err := url.Parse(p.portal)
	if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
		return nil, fmt.Errorf("session origin %s: the portal's own address (%q) is needed, to send browsers back to it", o, p.portal)
	}
	if ph := strings.ToLower(pu.Hostname()); ph == o.domain || strings.HasSuffix(ph, "."+o.domain) {
		return nil, fmt.Errorf("session origin %s: the portal (%s) must not be a host of the sessions' domain", o, p.portal)
	}
	p.origin = o
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.IPExtractor = s.echo.IPExtractor
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.Recover(), s.logRequests, limitBody, a.withAssetURLs)
	e.GET(enterPath, p.enter)
	e.Match(sessionMethods, "/sessions/:id/:secret/*", p.serveHost)
	e.GET("/sessions/:id/:secret", sessionSlash)
	// The terminal's page is the portal's: its scripts and styles.
	e.GET("/static/*", a.serve)
	p.host = e
	return p, nil
}

// transport returns the transport of run ref, which dials through
// machine node.
func (p *sessionProxy) transport(ref job.RunRef, node string) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.transports[ref]; t != nil {
		return t
	}
	if len(p.transports) >= maxSessionTransports {
		for k, t := range p.transports {
			t.CloseIdleConnections()
			delete(p.transports, k)
		}
	}
	t := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return p.dial(ctx, node, ref)
		},
		MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute, ForceAttemptHTTP2: false,
	}
	p.transports[ref] = t
	return t
}

// dial reaches run ref's session on machine node through its agent.
func (p *sessionProxy) dial(ctx context.Context, node string, ref job.RunRef) (net.Conn, error) {
	return p.s.app.DialSession(ctx, node, ref)
}

// forget drops the transports of job id's runs other than keep.
func (p *sessionProxy) forget(id int64, keep int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, t := range p.transports {
		if k.Job == id && k.Run != keep {
			t.CloseIdleConnections()
			delete(p.transports, k)
		}
	}
}

// sessionNode is the machine a running session serves on: the first of
// its placement.
func sessionNode(j *app.Job) string {
	if len(j.Placement) == 0 {
		return ""
	}
	pl := j.Placement[0]
	if i := strings.LastIndexByte(pl, ':'); i >= 0 {
		return pl[:i]
	}
	return pl
}

// servePortal handles /sessions/:id/:secret/* on the portal's origin.
// A browser (its login cookie) is handed over to the session's own
// origin when there is one; a script with an API token, or every
// request where there is none, is proxied here, its answers sandboxed
// (an origin of their own, opaque: they reach nothing of the portal's).
func (p *sessionProxy) servePortal(c echo.Context) error {
	u := currentUser(c)
	r := c.Request()
	if u == nil {
		if r.Method == http.MethodGet && !isWebsocket(r) {
			return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(r.URL.RequestURI()))
		}
		return echo.NewHTTPError(http.StatusUnauthorized, "log in to the portal to open sessions")
	}
	cred := currentCredential(c)
	sess, err := p.open(c, u)
	if err != nil {
		return err
	}
	j := sess.Job
	if p.origin != nil && cred.kind == credSession {
		if r.Method != http.MethodGet || isWebsocket(r) {
			return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("the session of job %d is served at its own address, %s: open it from its job page", j.ID, p.origin.urlFor(j.ID, r.Host)))
		}
		return p.handOver(c, j, cred)
	}
	// A browser's unsafe request or websocket must come from the portal's
	// own pages (the session's own checks come after).
	if !sameOrigin(r) {
		return echo.NewHTTPError(http.StatusForbidden, "a session's requests must come from the portal's own pages (Origin differs)")
	}
	if r.Header.Get("Service-Worker") != "" {
		return echo.NewHTTPError(http.StatusForbidden, "a session may not install a service worker on the portal's origin")
	}
	return p.forward(c, sess, cred, true)
}

// handOver sends a browser to job j's session on its own origin, with a
// grant for cred that the session's host exchanges for its cookie.
func (p *sessionProxy) handOver(c echo.Context, j *app.Job, cred credential) error {
	r := c.Request()
	g, err := p.keys.grant(sessionPass{cred: cred, job: j.ID}, p.s.cfg.Now())
	if err != nil {
		return err
	}
	to := p.origin.urlFor(j.ID, r.Host) + enterPath + "?grant=" + g + "&next=" + url.QueryEscape(r.URL.RequestURI())
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Redirect(http.StatusSeeOther, to)
}

// enter takes a grant on a session's host: the browser gets the host's
// cookie, good for the credential the grant was given for, then goes on
// to the page it asked for.
func (p *sessionProxy) enter(c echo.Context) error {
	r := c.Request()
	id, _ := p.origin.jobOf(r.Host)
	c.Response().Header().Set("Cache-Control", "no-store")
	pass, ok := p.keys.redeem(c.QueryParam("grant"), p.s.cfg.Now())
	if !ok || pass.job != id {
		// Used, expired or another session's: the job page opens it anew.
		return c.Redirect(http.StatusSeeOther, p.portal+"/jobs/"+strconv.FormatInt(id, 10))
	}
	v, err := p.keys.pass(pass, p.s.cfg.Now())
	if err != nil {
		return err
	}
	secure := p.origin.scheme == "https"
	name := passCookie
	if secure {
		name = "__Host-" + passCookie
	}
	c.SetCookie(&http.Cookie{Name: name, Value: v, Path: "/", HttpOnly: true, Secure: secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(passTTL.Seconds())})
	prefix := "/sessions/" + strconv.FormatInt(id, 10) + "/"
	next := safeNext(c.QueryParam("next"))
	if !strings.HasPrefix(next, prefix) {
		next = prefix
	}
	return c.Redirect(http.StatusSeeOther, next)
}

// serveHost handles /sessions/:id/:secret/* on the session's own host:
// who asks (the host's cookie, or an API token), whether the session is
// theirs and reachable, then the proxy.
func (p *sessionProxy) serveHost(c echo.Context) error {
	r := c.Request()
	hostJob, _ := p.origin.jobOf(r.Host)
	if id, err := strconv.ParseInt(c.Param("id"), 10, 64); err != nil || id != hostJob {
		return echo.NewHTTPError(http.StatusNotFound, "no such session")
	}
	u, cred, err := p.hostUser(c, hostJob)
	if err != nil {
		return err
	}
	if u == nil {
		if r.Method == http.MethodGet && !isWebsocket(r) {
			// The portal hands the browser over again, after a login if
			// it needs one.
			return c.Redirect(http.StatusSeeOther, p.portal+r.URL.RequestURI())
		}
		return echo.NewHTTPError(http.StatusUnauthorized, "open the session from the portal (its job page), or send an API token")
	}
	sess, err := p.open(c, u)
	if err != nil {
		return err
	}
	if !p.fromHost(r, sess.Job.ID) {
		return echo.NewHTTPError(http.StatusForbidden, "a session's requests must come from its own pages (Origin differs)")
	}
	return p.forward(c, sess, cred, false)
}

// hostUser is who asks on a session's host, as they are now: the user of
// the credential the host's cookie was given for, or of an API token;
// nil when neither is good (any more).
func (p *sessionProxy) hostUser(c echo.Context, id int64) (*app.User, credential, error) {
	r := c.Request()
	if token, ok := strings.CutPrefix(r.Header.Get(echo.HeaderAuthorization), "Bearer "); ok && token != "" {
		return p.s.tokenUser(c, token)
	}
	for _, name := range []string{"__Host-" + passCookie, passCookie} {
		ck, err := r.Cookie(name)
		if err != nil || ck.Value == "" {
			continue
		}
		pass, ok := p.keys.lookup(ck.Value, p.s.cfg.Now())
		if !ok || pass.job != id {
			continue
		}
		users, err := p.s.credentialUsers(r.Context(), []credential{pass.cred})
		if err != nil {
			return nil, credential{}, err
		}
		if u := users[pass.cred]; u != nil {
			return u, pass.cred, nil
		}
	}
	return nil, credential{}, nil
}

// fromHost reports whether r may reach job id's session from its host: a
// safe request, or one whose Origin (when the browser sent one) is that
// host's own.
func (p *sessionProxy) fromHost(r *http.Request, id int64) bool {
	u, check, err := requestOrigin(r)
	if !check {
		return true
	}
	if err != nil || u.Scheme != p.origin.scheme {
		return false
	}
	got, ok := p.origin.jobOf(u.Host)
	return ok && got == id && strings.EqualFold(u.Host, r.Host)
}

// open returns the session the request names, once u may open it (an
// admin's opening of another's session is audited).
func (p *sessionProxy) open(c echo.Context, u *app.User) (*app.Session, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return nil, echo.NewHTTPError(http.StatusNotFound, "no such session")
	}
	return p.opener.Open(c.Request().Context(), app.Actor{User: u, From: c.RealIP()}, id, c.Param("secret"))
}

// Content security policies of the pages at a session's address.
const (
	// sandboxPolicy is sent with a session's answers on the portal's
	// origin: they run in an opaque origin of their own, with no access
	// to the portal's cookies, storage, pages or service workers.
	sandboxPolicy = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"
	// sessionPagePolicy is the policy of the portal's own pages at a
	// session's address (the terminal, the waiting page).
	sessionPagePolicy = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
		"object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)

// forward proxies the request to session sess (or draws its terminal
// page), for as long as cred's user may open it. sandbox: the answer is
// on the portal's origin.
func (p *sessionProxy) forward(c echo.Context, sess *app.Session, cred credential, sandbox bool) error {
	r, j := c.Request(), sess.Job
	if j.State != job.Running || len(j.Placement) == 0 {
		return p.unavailable(c, j, "")
	}
	rest := c.Param("*")
	if job.SessionType(j.SessionType) == job.SessionTerminal && rest == "" && r.Method == http.MethodGet && !isWebsocket(r) {
		c.Response().Header().Set("Content-Security-Policy", sessionPagePolicy)
		return p.s.render(c, http.StatusOK, templates.SessionTerminalPage(templates.SessionTerminal{
			JobID: j.ID, JobName: j.Name, Prefix: sess.Prefix, Portal: p.portalLink(sandbox),
		}))
	}
	ref := job.RunRef{Job: j.ID, Run: j.Run}
	p.forget(j.ID, j.Run)
	// Every request lasts only while its user may open the session
	// (recheck): a websocket is closed when they log out.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	lr := &liveRequest{cred: cred, job: j.ID, run: j.Run, cancel: cancel}
	p.track(lr)
	defer p.untrack(lr)
	r = r.WithContext(ctx)
	// Sessions answer slowly and stream (kernels, downloads): the
	// portal's request timeouts are for its own pages.
	rc := http.NewResponseController(c.Response())
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(downloadTimeout))
	token := sess.Token
	// A page of Jupyter's that the browser opens gets a link back to the
	// portal (sessionlink.go), so it is asked for uncompressed.
	portalLink := ""
	if job.SessionType(j.SessionType) == job.SessionJupyter && wantsPortalLink(r) {
		portalLink = portalLinkHTML(fmt.Sprintf("%s/jobs/%d", p.portalLink(sandbox), j.ID), j.ID)
	}
	rp := &httputil.ReverseProxy{
		Transport:     p.transport(ref, sessionNode(j)),
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "session"
			if job.SessionType(j.SessionType) == job.SessionTerminal {
				// The terminal serves at its root (core/terminal.Path).
				pr.Out.URL.Path = "/" + rest
				pr.Out.URL.RawPath = ""
			}
			pr.Out.Host = pr.In.Host // Jupyter checks Origin against Host
			pr.SetXForwarded()
			stripPortalCredentials(pr.Out.Header)
			pr.Out.Header.Set("Authorization", "token "+token)
			if portalLink != "" {
				pr.Out.Header.Del("Accept-Encoding")
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			dropPortalCookies(resp.Header)
			if sandbox {
				resp.Header.Del("Service-Worker-Allowed")
				resp.Header.Add("Content-Security-Policy", sandboxPolicy)
			}
			if portalLink != "" {
				return addPortalLink(resp, portalLink)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			p.s.cfg.Logger.Info("session not reachable", "job", j.ID, "run", j.Run, "err", err)
			if err := p.unavailable(c, j, "Its server does not answer yet ("+err.Error()+"): this page tries again."); err != nil {
				c.Error(err)
			}
		},
	}
	rp.ServeHTTP(c.Response(), r)
	return nil
}

// portalLink is what the links of a page at a session's address start
// with: "" on the portal's origin, the portal's address elsewhere.
func (p *sessionProxy) portalLink(onPortal bool) string {
	if onPortal {
		return ""
	}
	return p.portal
}

func (p *sessionProxy) track(lr *liveRequest) {
	p.mu.Lock()
	p.live[lr] = struct{}{}
	p.mu.Unlock()
}

func (p *sessionProxy) untrack(lr *liveRequest) {
	p.mu.Lock()
	delete(p.live, lr)
	p.mu.Unlock()
}

// recheck ends the proxied requests whose user may no longer open their
// session: the credential ended (logout, revocation, expiry, a disabled
// or deleted account), the user's role or team changed so that they may
// not, or the session's run ended. When the store cannot answer it ends
// nothing: the requests are checked again on the next call.
func (p *sessionProxy) recheck(ctx context.Context) error {
	p.mu.Lock()
	live := make([]*liveRequest, 0, len(p.live))
	for lr := range p.live {
		live = append(live, lr)
	}
	p.mu.Unlock()
	if len(live) == 0 {
		return nil
	}
	creds := make([]credential, len(live))
	for i, lr := range live {
		creds[i] = lr.cred
	}
	users, err := p.s.credentialUsers(ctx, creds)
	if err != nil {
		return err
	}
	jobs := make(map[int64]*app.Job)
	for _, lr := range live {
		why := "its " + lr.cred.kind.String() + " ended"
		if u := users[lr.cred]; u != nil {
			if why, err = p.s.app.SessionEnded(ctx, u, lr.job, lr.run, jobs); err != nil {
				return err
			}
		}
		if why != "" {
			p.s.cfg.Logger.Info("session connection closed", "job", lr.job, "run", lr.run, "why", why)
			lr.cancel()
		}
	}
	return nil
}

// unavailable answers for a session that cannot be reached: a page that
// retries for a browser while the job starts, a status for the others.
func (p *sessionProxy) unavailable(c echo.Context, j *app.Job, why string) error {
	status, retry := http.StatusServiceUnavailable, true
	switch {
	case j.State.Final():
		status, retry = http.StatusGone, false
		why = "The session has ended."
	case j.State != job.Running:
		why = "It starts when the scheduler gives it its GPUs: this page tries again."
	}
	if retry {
		c.Response().Header().Set("Retry-After", "2")
	}
	r := c.Request()
	if isWebsocket(r) || !strings.Contains(r.Header.Get("Accept"), "text/html") {
		return echo.NewHTTPError(status, fmt.Sprintf("the session of job %d is not reachable: the job is %s. %s", j.ID, j.State, why))
	}
	c.Response().Header().Set("Content-Security-Policy", sessionPagePolicy)
	_, onHost := p.hostOf(r)
	return p.s.render(c, status, templates.SessionUnavailablePage(templates.SessionUnavailable{
		JobID: j.ID, JobName: j.Name, State: string(j.State), Why: why, Retry: retry, Portal: p.portalLink(!onHost),
	}))
}

// hostOf returns the job whose session's host r was sent to, and
// whether it was sent to one (and not to the portal).
func (p *sessionProxy) hostOf(r *http.Request) (int64, bool) {
	if p.origin == nil {
		return 0, false
	}
	return p.origin.jobOf(r.Host)
}

// isWebsocket reports whether r asks to upgrade to a websocket.
func isWebsocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// sameOrigin reports whether r may reach a session: a safe request, or
// one whose Origin (when the browser sent one) is the portal's own.
func sameOrigin(r *http.Request) bool {
	u, check, err := requestOrigin(r)
	return !check || err == nil && strings.EqualFold(u.Host, r.Host)
}

// requestOrigin is the Origin of r parsed, when it must be checked: a
// websocket or an unsafe request that a browser sent (browsers send
// Origin with those). check is false for a safe request, and for one
// without Origin (not a browser's cross-site request).
func requestOrigin(r *http.Request) (u *url.URL, check bool, err error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if !isWebsocket(r) {
			return nil, false, nil
		}
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil, false, nil
	}
	u, err = url.Parse(origin)
	return u, true, err
}

// portalCookies are the cookies of the portal, which never reach a
// session.
var portalCookies = []string{sessionCookie, csrfCookie, csrfHostCookie, passCookie, "__Host-" + passCookie}

// stripPortalCredentials removes the portal's credentials from a request
// to a session: its cookies, Authorization and the CSRF header. The
// session's own cookies stay.
func stripPortalCredentials(h http.Header) {
	h.Del("Authorization")
	h.Del(csrfHeader)
	cookies := h.Values("Cookie")
	h.Del("Cookie")
	var kept []string
	for _, line := range cookies {
		for _, part := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if name == "" || isPortalCookie(name) {
				continue
			}
			kept = append(kept, strings.TrimSpace(part))
		}
	}
	if len(kept) > 0 {
		h.Set("Cookie", strings.Join(kept, "; "))
	}
}

// dropPortalCookies removes what a session answers that would set or
// clear one of the portal's cookies.
func dropPortalCookies(h http.Header) {
	set := h.Values("Set-Cookie")
	if len(set) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, line := range set {
		name, _, _ := strings.Cut(strings.TrimSpace(line), "=")
		if !isPortalCookie(strings.TrimSpace(name)) {
			h.Add("Set-Cookie", line)
		}
	}
}

func isPortalCookie(name string) bool {
	for _, p := range portalCookies {
		if strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}

// loadBearerUser authenticates a request that carries an API token and
// no session cookie (scripts reaching a session); the token is stripped
// before the request is forwarded.
func (s *Server) loadBearerUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if currentUser(c) != nil {
			return next(c)
		}
		token, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
		if !ok || token == "" {
			return next(c)
		}
		u, cred, err := s.tokenUser(c, token)
		if err != nil {
			return err
		}
		c.Set(userKey, u)
		c.Set(credKey, cred)
		return next(c)
	}
}

// sessionMethods are the methods the proxy forwards.
var sessionMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// sessionSlash sends /sessions/ID/SECRET to /sessions/ID/SECRET/.
func sessionSlash(c echo.Context) error {
	u := *c.Request().URL
	u.Path += "/"
	u.RawPath = ""
	return c.Redirect(http.StatusSeeOther, u.RequestURI())
}

// sessionTypeNames are the session types as pages name them.
var sessionTypeNames = map[string]string{
	string(job.SessionJupyter): "Jupyter", string(job.SessionTerminal): "terminal", string(job.SessionWeb): "web app",
}

// sessionWorkload is a session's workload as the jobs table shows it.
func sessionWorkload(typ string, command []string) string {
	w := sessionTypeNames[typ] + " session"
	if len(command) > 0 {
		w += ": " + cmdline.Join(command)
	}
	return w
}

// sessionView is how the job page shows j's session to u; nil for a
// batch job.
func (s *Server) sessionView(u *app.User, j *app.Job) *templates.SessionView {
	if !j.IsSession() {
		return nil
	}
	v := &templates.SessionView{Type: sessionTypeNames[j.SessionType]}
	switch {
	case !app.CanOpenSession(u, j):
		v.Note = "Only " + j.User + " (and admins) may open it."
	case j.State == job.Running:
		v.URL = s.app.SessionURL(u, j)
		v.Note = "Opens in a new tab, through the portal, kept apart from the portal's own pages. Its address is yours alone: do not share it."
		if u.Name != j.User {
			v.Note = "You open " + j.User + "'s session as an admin: it is recorded in the audit log."
		}
	case j.State.Final():
		v.Note = "The session has ended."
	default:
		v.Note = "It can be opened once it runs."
	}
	return v
}
