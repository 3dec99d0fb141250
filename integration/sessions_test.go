package integration

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"
)

// Interactive sessions (issue 22): a Jupyter session and a terminal
// session, started by alice through the API, opened only through the
// portal's proxy, over the agent's tunnel.

// sessionView is the part of the API's job a session test reads.
type sessionView struct {
	ID        int64    `json:"id"`
	State     string   `json:"state"`
	Reason    string   `json:"reason"`
	Placement []string `json:"placement"`
	Session   *struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	} `json:"session"`
}

// needJupyter fails under CI, and skips elsewhere, without a Jupyter
// server (scripts/ensure-jupyter installs Debian's python3-notebook).
func needJupyter(t *testing.T) {
	t.Helper()
	for _, p := range []string{"jupyter-lab", "jupyter-notebook"} {
		if _, err := exec.LookPath(p); err == nil {
			return
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Jupyter server: scripts/ensure-jupyter installs python3-notebook")
	}
	t.Skip("no Jupyter server (scripts/ensure-jupyter installs python3-notebook)")
}

// userWithPassword creates a researcher of team vision with a password.
func userWithPassword(t *testing.T, data, name, password string) {
	t.Helper()
	cmd := exec.Command(binary, "admin", "--data", data, "create-user", "--name", name, "--role", "researcher", "--team", "vision", "--password-stdin")
	cmd.Stdin = strings.NewReader(password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("create-user %s: %v: %s", name, err, out)
	}
}

// startSession submits a session for a and waits until it runs.
func startSession(t *testing.T, a *api, req map[string]any) sessionView {
	t.Helper()
	var created sessionView
	if st := a.do(http.MethodPost, "/api/v1/jobs", req, &created); st != http.StatusCreated {
		t.Fatalf("start session %v: status %d", req, st)
	}
	if created.Session == nil || !strings.HasPrefix(created.Session.URL, fmt.Sprintf("/sessions/%d/", created.ID)) {
		t.Fatalf("session %d: the API shows its owner no URL: %+v", created.ID, created.Session)
	}
	j := a.waitState(created.ID, 30*time.Second, "running", "failed", "succeeded")
	if j.State != "running" {
		t.Fatalf("session %d is %s: %q\n%s", created.ID, j.State, j.Reason, jobLog(t, a, created.ID))
	}
	created.Placement = j.Placement
	return created
}

// sessionReady waits until a GET of path through the proxy answers 200.
func sessionReady(t *testing.T, b *browser, path string) string {
	t.Helper()
	var body string
	eventually(t, 30*time.Second, "the session to answer "+path, func() bool {
		st, got := b.get(path)
		body = got
		return st == http.StatusOK
	})
	return body
}

// dialSession opens a websocket through the proxy as browser b would,
// trying again while the portal answers 503 (the session's server does
// not answer yet: a terminal's page is the portal's own, drawn before
// the terminal server listens; the page's script reconnects likewise).
func dialSession(t *testing.T, b *browser, path string) *websocket.Conn {
	t.Helper()
	ws := "ws" + strings.TrimPrefix(b.base, "http") + path
	hdr := cookieHeader(b)
	hdr.Set("Origin", b.base)
	var c *websocket.Conn
	var err error
	st := 0
	eventually(t, 30*time.Second, "the session's websocket "+path, func() bool {
		var resp *http.Response
		c, resp, err = wsDialer.Dial(ws, hdr)
		st = 0
		if resp != nil {
			st = resp.StatusCode
		}
		return err == nil || st != http.StatusServiceUnavailable
	})
	if err != nil {
		t.Fatalf("websocket %s: %v (status %d)", path, err, st)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sessionToken returns the token a session of the user uid was started
// with, as its processes have it in their environment.
func sessionToken(t *testing.T, uid string) string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		info, err := os.Stat(p)
		if err != nil || fmt.Sprint(info.Sys().(*syscall.Stat_t).Uid) != uid {
			continue
		}
		env, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for v := range strings.SplitSeq(string(env), "\x00") {
			if token, ok := strings.CutPrefix(v, "GPUPORTAL_SESSION_TOKEN="); ok && token != "" {
				return token
			}
		}
	}
	t.Fatalf("no process of uid %s holds a session token", uid)
	return ""
}

// secretsNotStored checks, from the database's own files, that neither
// the URL secret of the session at prefix nor its token is stored: a copy
// of the database opens no session. The key they derive from is a file
// only the server's account reads.
func secretsNotStored(t *testing.T, data, prefix, token string) {
	t.Helper()
	secret := strings.Split(strings.Trim(prefix, "/"), "/")[2]
	files, _ := filepath.Glob(filepath.Join(data, "gpuportal.db*"))
	if len(files) == 0 {
		t.Fatalf("no database in %s", data)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for what, v := range map[string]string{"URL secret": secret, "token": token} {
			if strings.Contains(string(b), v) {
				t.Errorf("%s holds the session's %s", filepath.Base(f), what)
			}
		}
	}
	info, err := os.Stat(filepath.Join(data, "session.key"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("session key file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
}

// loopbackListeners lists the TCP ports user uid listens on, and those of
// them bound to an address other than loopback.
func loopbackListeners(t *testing.T, uid string) (ports []int, exposed []string) {
	t.Helper()
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		sc.Scan() // the header
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 8 || fs[3] != "0A" || fs[7] != uid { // 0A: LISTEN
				continue
			}
			addr, portHex, _ := strings.Cut(fs[1], ":")
			port, _ := strconv.ParseInt(portHex, 16, 32)
			ports = append(ports, int(port))
			ip, _ := hex.DecodeString(addr)
			// /proc keeps addresses as host-order 32-bit words.
			for i := 0; i+4 <= len(ip); i += 4 {
				ip[i], ip[i+1], ip[i+2], ip[i+3] = ip[i+3], ip[i+2], ip[i+1], ip[i]
			}
			if !net.IP(ip).IsLoopback() {
				exposed = append(exposed, fmt.Sprintf("%s:%d", net.IP(ip), port))
			}
		}
		fh.Close()
	}
	return ports, exposed
}

// TestSessions: alice starts a Jupyter session through the API, opens it
// in Chromium through the portal, and a kernel prints her GPUs and Unix
// account; bob, logged in, is refused her session's address; the session
// listens on loopback only. A terminal session runs what is typed through
// its websocket, as alice, and comes back after a reconnection.
func TestSessions(t *testing.T) {
	needRootAccounts(t)
	needJupyter(t)
	alice := unixUser(t, "gpt-ses-alice")
	unixUser(t, "gpt-ses-bob")
	// The agent runs the terminal server from its own binary, as alice.
	if err := os.Chmod(filepath.Dir(binary), 0o755); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0")
	startAgent(t, srv.URL, "gpu-22", "--run-as", "owner", "--work-dir", passableDir(t))
	waitGPUs(t, srv.URL, 2)
	userWithPassword(t, data, "gpt-ses-alice", "alice-password")
	userWithPassword(t, data, "gpt-ses-bob", "bob-password")
	aliceAPI := newAPI(t, srv.URL, "gpt-ses-alice", "alice-password")
	aliceWeb := newBrowser(t, srv.URL)
	aliceWeb.login("gpt-ses-alice", "alice-password")
	bobWeb := newBrowser(t, srv.URL)
	bobWeb.login("gpt-ses-bob", "bob-password")
	bobAPI := newAPI(t, srv.URL, "gpt-ses-bob", "bob-password")

	nb := startSession(t, aliceAPI, map[string]any{"name": "notebook", "gpus": 1, "session": map[string]any{"type": "jupyter"}})
	prefix := nb.Session.URL
	sessionReady(t, aliceWeb, prefix+"api/status")
	secretsNotStored(t, data, prefix, sessionToken(t, alice.Uid))
	// Opened from the portal, the notebook is served on a host of its own.
	aliceNB := aliceWeb.openSession(prefix)

	// bob sees the job (same team) but neither its address nor into it.
	var bj sessionView
	bobAPI.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", nb.ID), nil, &bj)
	if bj.Session == nil || bj.Session.URL != "" {
		t.Errorf("bob's view of alice's session: %+v; want its type and no URL", bj.Session)
	}
	for _, p := range []string{prefix, prefix + "tree", prefix + "api/kernels"} {
		if st, body := bobWeb.get(p); st != http.StatusForbidden {
			t.Errorf("bob, logged in, GET %s: %d, want 403\n%.300s", p, st, body)
		}
		if st := bobAPI.do(http.MethodGet, strings.TrimPrefix(p, ""), nil, nil); st != http.StatusForbidden {
			t.Errorf("bob's API token, GET %s: %d, want 403", p, st)
		}
	}
	// Logged out: sent to the login page, never the session.
	if st, body := newBrowser(t, srv.URL).get(prefix + "api/status"); st != http.StatusOK || !strings.Contains(body, `name="username"`) {
		t.Errorf("logged out, GET %sapi/status: %d, want the login page\n%.300s", prefix, st, body)
	}
	if st, _ := aliceWeb.get(fmt.Sprintf("/sessions/%d/wrong-secret/tree", nb.ID)); st != http.StatusNotFound {
		t.Errorf("alice with a wrong secret: %d, want 404", st)
	}

	// Every port alice's session listens on is on loopback only, and the
	// machine's other addresses refuse it.
	ports, exposed := loopbackListeners(t, alice.Uid)
	if len(ports) == 0 {
		t.Fatal("alice's session listens on no port")
	}
	if len(exposed) > 0 {
		t.Errorf("alice's session listens beyond loopback: %v", exposed)
	}
	if ip := outboundIP(); ip != "" {
		for _, p := range ports {
			if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(p)), time.Second); err == nil {
				c.Close()
				t.Errorf("port %d of alice's session answers on %s", p, ip)
			}
		}
	}

	// The page loads in Chromium through the proxy.
	ctx := newTabFor(t, 2*time.Minute)
	began := time.Now()
	err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/login"),
		chromedp.WaitVisible(`input[name=username]`),
		chromedp.SendKeys(`input[name=username]`, "gpt-ses-alice"),
		chromedp.SendKeys(`input[name=password]`, "alice-password"),
		chromedp.Submit(`input[name=password]`),
		chromedp.WaitVisible(`#jobs`),
		chromedp.Navigate(srv.URL+prefix+"tree"),
		chromedp.WaitVisible(`#notebook_list, #main, .jp-LabShell`),
	)
	if err != nil {
		t.Fatalf("open the notebook in Chromium: %v\n%s", err, srv.output())
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Chromium opened %q", title)
	screenshot(t, ctx, "session-jupyter")
	// Code in a notebook's output runs on the notebook's own origin: it
	// reads nothing of the portal's as alice.
	script, err := os.ReadFile("../testdata/session-attack/attack.js")
	if err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](string(script)+"; attack("+strconv.Quote(srv.URL)+").then(r => JSON.stringify(r))", chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	var attacked attackResult
	if err := json.Unmarshal([]byte(got), &attacked); err != nil {
		t.Fatalf("the script's result %q: %v", got, err)
	}
	t.Logf("a script in the notebook's page: %+v", attacked)
	if strings.EqualFold(attacked.Origin, srv.URL) || !strings.HasPrefix(attacked.Read, "blocked") {
		t.Errorf("a script in the notebook's page, at %s, read the portal: %q", attacked.Origin, attacked.Read)
	}
	backToPortal(t, ctx, srv.URL, nb.ID)

	// A kernel runs code, through the proxy: REST to start it, its
	// websocket to execute.
	kernel := jupyterKernel(t, aliceNB, prefix)
	out := executeCell(t, dialSession(t, aliceNB, prefix+"api/kernels/"+kernel+"/channels"),
		`import os, pwd; print("GPUS=" + os.environ["CUDA_VISIBLE_DEVICES"], "USER=" + pwd.getpwuid(os.getuid()).pw_name)`)
	gpu := nb.Placement[0][strings.LastIndexByte(nb.Placement[0], ':')+1:]
	if want := "GPUS=" + gpu + " USER=gpt-ses-alice"; strings.TrimSpace(out) != want {
		t.Errorf("the kernel printed %q, want %q", out, want)
	}

	// The session's job page and the submit form, at both widths: no
	// console errors, nothing wider than the window; the job page offers
	// alice the Open button.
	sc := newScreenChecker(t, ctx, srv.URL)
	for _, vp := range viewports {
		for _, sn := range []screen{{"session-job", fmt.Sprintf("/jobs/%d", nb.ID), 200}, {"session-submit", "/jobs/new", 200}} {
			problems, err := sc.check(sn, vp, "gpt-ses-alice")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("%s at %s: %s", sn.path, vp.name, p)
			}
		}
	}
	err = chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", srv.URL, nb.ID)), chromedp.WaitVisible(`#session-open`))
	if err != nil {
		t.Fatalf("the job page of a running session has no Open button: %v", err)
	}
	if href, err := attrOf(ctx, `#session-open`, "href"); href != prefix {
		t.Errorf("the Open button leads to %q (%v), want %q", href, err, prefix)
	}
	if os.Getenv("GPUPORTAL_SCREENSHOTS") != "" {
		_ = chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/jobs/new"), chromedp.Click(`input[name=kind][value=session]`))
		screenshot(t, ctx, "session-submit-chosen")
	}

	t.Logf("notebook in Chromium, kernel, pages checked: %v", time.Since(began).Round(time.Millisecond))
	// What the proxy adds per request, against direct access.
	measureSessionProxy(t, aliceNB, aliceAPI, nb.ID, prefix)

	t.Logf("measured: %v", time.Since(began).Round(time.Millisecond))
	// A terminal session: what is typed runs, as alice.
	term := startSession(t, aliceAPI, map[string]any{"name": "shell", "gpus": 1, "session": map[string]any{"type": "terminal"}})
	if body := sessionReady(t, aliceWeb, term.Session.URL); !strings.Contains(body, `id="terminal"`) {
		t.Fatalf("the terminal page:\n%.500s", body)
	}
	aliceTerm := aliceWeb.openSession(term.Session.URL)
	ws := dialSession(t, aliceTerm, term.Session.URL+"pty")
	_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","cols":100,"rows":30}`))
	_ = ws.WriteMessage(websocket.BinaryMessage, []byte("echo hello-$((6*7)) $(id -un) $(stty size)\n"))
	readTerminalUntil(t, ws, "hello-42 gpt-ses-alice 30 100")
	ws.Close()
	// Reconnected: the same shell, its latest output first.
	ws = dialSession(t, aliceTerm, term.Session.URL+"pty")
	readTerminalUntil(t, ws, "hello-42 gpt-ses-alice 30 100")
	_ = ws.WriteMessage(websocket.BinaryMessage, []byte("echo again-$((1+1))\n"))
	readTerminalUntil(t, ws, "again-2")
	// bob cannot open the terminal's websocket.
	u, _ := url.Parse(srv.URL)
	hdr := cookieHeader(bobWeb)
	hdr.Set("Origin", srv.URL)
	if _, resp, err := websocket.DefaultDialer.Dial("ws://"+u.Host+term.Session.URL+"pty", hdr); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob's websocket to alice's terminal: %v, want 403", err)
	}
	// Nor at the terminal's own host, where he holds no pass.
	bobAtTerm := bobWeb.at(aliceTerm.base)
	hdr = cookieHeader(bobAtTerm)
	hdr.Set("Origin", aliceTerm.base)
	if _, resp, err := wsDialer.Dial("ws"+strings.TrimPrefix(aliceTerm.base, "http")+term.Session.URL+"pty", hdr); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bob's websocket to alice's terminal at its host: %v, want 401", err)
	}
	// In Chromium: xterm.js draws the same shell, and what is typed runs.
	err = chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+term.Session.URL),
		chromedp.WaitVisible(`#terminal .xterm`),
	)
	if err != nil {
		t.Fatalf("open the terminal in Chromium: %v", err)
	}
	eventually(t, 10*time.Second, "the terminal to connect in Chromium", func() bool {
		st, _ := chromedp.Run(ctx, chromedp.Text(`#terminal-status`))
		return st == "connected"
	})
	// The text arrives as typed text that is not keys (as a paste or an
	// input method would), then Enter: chromedp's SendKeys sends each
	// character twice to an editor that reads key presses (its keydown and
	// char events).
	typeLine := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: "echo from-browser-$((2*3))"}); err != nil {
			return err
		}
		for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeRawKeyDown, input.DispatchKeyEventTypeKeyUp} {
			if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, input.DispatchKeyEventParams{
				Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13,
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err := chromedp.Do(ctx, chromedp.Focus(`#terminal .xterm-helper-textarea`), typeLine); err != nil {
		t.Fatal(err)
	}
	var rows string
	shown := false
	defer func() {
		if !shown {
			screenshot(t, ctx, "session-terminal-failed")
			t.Logf("the browser's terminal shows:\n%s", rows)
		}
	}()
	eventually(t, 10*time.Second, "the browser's terminal to show the typed command's output", func() bool {
		rows, _ = chromedp.Run(ctx, chromedp.Text(`#terminal .xterm-rows`))
		return strings.Contains(rows, "from-browser-6")
	})
	shown = true
	screenshot(t, ctx, "session-terminal")
	sessionSocketsFollowRights(t, srv, aliceNB, prefix, kernel, term.Session.URL)
	// Typing `exit` ends the shell, and with it the session's job.
	ws = dialSession(t, aliceTerm, term.Session.URL+"pty")
	readTerminalUntil(t, ws, "from-browser-6")
	_ = ws.WriteMessage(websocket.BinaryMessage, []byte("exit\n"))
	if j := aliceAPI.waitState(term.ID, 20*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Errorf("the terminal session after exit: %s %q", j.State, j.Reason)
	}
	sessionSocketEndsWithAccount(t, srv, aliceNB, prefix, kernel)
}

// outboundIP is an address of this machine other than loopback, or "".
func outboundIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// backToPortal: the Jupyter page open in ctx links back to the portal,
// the session's job's page, and the link takes the browser there
// (issue 36: a Jupyter session had no way back).
func backToPortal(t *testing.T, ctx context.Context, base string, id int64) {
	t.Helper()
	err := chromedp.Do(ctx, chromedp.WaitVisible(`#gpuportal-back`))
	var href, text string
	if err == nil {
		href, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("gpuportal-back").href`))
	}
	if err == nil {
		text, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("gpuportal-back").innerText`))
	}
	want := fmt.Sprintf("%s/jobs/%d", base, id)
	if err != nil || href != want || !strings.Contains(text, "gpuportal") {
		t.Errorf("Jupyter's page's link back: %q to %q, %v; want one to %s", text, href, err, want)
		return
	}
	for _, vp := range viewports {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.width, vp.height)); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "session-jupyter-back-"+vp.name)
	}
	err = chromedp.Do(ctx, chromedp.Click(`#gpuportal-back`), chromedp.WaitVisible(`#session-open`),
		chromedp.EmulateViewport(viewports[0].width, viewports[0].height))
	loc := ""
	if err == nil {
		loc, err = chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	}
	if err != nil || loc != want {
		t.Errorf("following the link back: at %q, %v; want the job's page %s", loc, err, want)
	}
}

// jupyterKernel starts a kernel through the proxy and returns its ID.
func jupyterKernel(t *testing.T, b *browser, prefix string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+prefix+"api/kernels", strings.NewReader(`{"name":"python3"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", b.base)
	u, _ := url.Parse(b.base)
	for _, ck := range b.c.Jar.Cookies(u.JoinPath(prefix)) {
		if ck.Name == "_xsrf" {
			req.Header.Set("X-XSRFToken", ck.Value)
		}
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var k struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&k); err != nil || resp.StatusCode != http.StatusCreated || k.ID == "" {
		t.Fatalf("start a kernel: status %d, %v", resp.StatusCode, err)
	}
	return k.ID
}

// executeCell runs code on a kernel's channels and returns what it printed.
func executeCell(t *testing.T, ws *websocket.Conn, code string) string {
	t.Helper()
	msgID := fmt.Sprintf("it-%d", time.Now().UnixNano())
	msg := map[string]any{
		"header":        map[string]any{"msg_id": msgID, "username": "it", "session": "it-session", "msg_type": "execute_request", "version": "5.3"},
		"parent_header": map[string]any{}, "metadata": map[string]any{}, "channel": "shell",
		"content": map[string]any{"code": code, "silent": false, "store_history": false, "user_expressions": map[string]any{}, "allow_stdin": false},
	}
	if err := ws.WriteJSON(msg); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		var m struct {
			Channel      string         `json:"channel"`
			MsgType      string         `json:"msg_type"`
			ParentHeader map[string]any `json:"parent_header"`
			Content      map[string]any `json:"content"`
		}
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("read the kernel's answer: %v (so far %q)", err, out.String())
		}
		if m.ParentHeader["msg_id"] != msgID {
			continue
		}
		switch m.MsgType {
		case "stream":
			out.WriteString(fmt.Sprint(m.Content["text"]))
		case "error":
			t.Fatalf("the cell failed: %v", m.Content)
		case "status":
			if m.Content["execution_state"] == "idle" {
				return out.String()
			}
		}
	}
}

// readUntil reads a terminal's output until it contains want.
func readTerminalUntil(t *testing.T, ws *websocket.Conn, want string) {
	t.Helper()
	var got strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_ = ws.SetReadDeadline(deadline)
	for !strings.Contains(got.String(), want) {
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("terminal output without %q: %v\n%s", want, err, got.String())
		}
		got.Write(b)
	}
}

// socketClosedWithin reads ws until it is closed, and fails t unless that
// happens within d of began; it returns how long after began it was.
func socketClosedWithin(t *testing.T, ws *websocket.Conn, began time.Time, d time.Duration, what string) time.Duration {
	t.Helper()
	_ = ws.SetReadDeadline(began.Add(d))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: still open %v later", what, d)
		}
		return time.Since(began)
	}
}

// sessionSocketsFollowRights: a terminal's and a kernel's websockets
// opened with a login close within seconds of its logout, while the same
// user's other login keeps its own; the pass of the ended login opens
// nothing.
func sessionSocketsFollowRights(t *testing.T, srv *server, aliceNB *browser, nbPrefix, kernel, termPrefix string) {
	t.Helper()
	other := newBrowser(t, srv.URL)
	other.login("gpt-ses-alice", "alice-password")
	otherTerm, otherNB := other.openSession(termPrefix), other.openSession(nbPrefix)
	term := dialSession(t, otherTerm, termPrefix+"pty")
	chans := dialSession(t, otherNB, nbPrefix+"api/kernels/"+kernel+"/channels")
	// A terminal takes one connection at a time: the login that stays
	// keeps a kernel's.
	kept := dialSession(t, aliceNB, nbPrefix+"api/kernels/"+kernel+"/channels")
	_ = term.WriteMessage(websocket.BinaryMessage, []byte("echo before-logout-$((3*3))\n"))
	readTerminalUntil(t, term, "before-logout-9")

	csrf := other.csrf("/jobs")
	began := time.Now()
	if st, path, _ := other.post("/logout", url.Values{"_csrf": {csrf}}); st != http.StatusOK || path != "/login" {
		t.Fatalf("logout: %d at %s", st, path)
	}
	t.Logf("after logout, the terminal's websocket closed in %v, the kernel's in %v",
		socketClosedWithin(t, term, began, 5*time.Second, "the terminal's websocket of a logged-out login").Round(time.Millisecond),
		socketClosedWithin(t, chans, began, 5*time.Second, "the kernel's websocket of a logged-out login").Round(time.Millisecond))
	// The pass that login got opens nothing now: back to the portal,
	// which asks for a login.
	if st, body := otherTerm.get(termPrefix); st != http.StatusOK || !strings.Contains(body, `name="username"`) {
		t.Errorf("the logged-out login's pass at the terminal's host: %d, want the login page\n%.300s", st, body)
	}
	// alice's other login keeps its connection.
	if out := executeCell(t, kept, `print("still-here", 6*7)`); strings.TrimSpace(out) != "still-here 42" {
		t.Errorf("the kernel, through the login that stays: %q", out)
	}
	kept.Close()
}

// sessionSocketEndsWithAccount: an admin disables alice; her session's
// websocket closes within seconds.
func sessionSocketEndsWithAccount(t *testing.T, srv *server, aliceNB *browser, nbPrefix, kernel string) {
	t.Helper()
	chans := dialSession(t, aliceNB, nbPrefix+"api/kernels/"+kernel+"/channels")
	admin := newAPI(t, srv.URL, "admin", "dev")
	began := time.Now()
	if st := admin.do(http.MethodPost, "/api/v1/users/gpt-ses-alice/disable", nil, nil); st != http.StatusOK {
		t.Fatalf("disable alice: %d", st)
	}
	t.Logf("after her account was disabled, the kernel's websocket closed in %v",
		socketClosedWithin(t, chans, began, 5*time.Second, "the kernel's websocket of a disabled account").Round(time.Millisecond))
}
