// The terminal of a terminal session (docs/portal.md): xterm.js drawing
// the shell that core/terminal serves on the machine, through the portal's
// proxy at <session prefix>pty. Binary frames carry the terminal's bytes
// both ways; a text frame resizes it. A lost connection is retried with
// backoff, and the shell is the same one (its latest output comes first).
(function () {
  "use strict";
  var el = document.getElementById("terminal");
  var status = document.getElementById("terminal-status");
  if (!el || !window.Terminal) return;
  var term = new window.Terminal({ cursorBlink: true, convertEol: false, scrollback: 5000,
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" });
  var fit = window.FitAddon ? new window.FitAddon.FitAddon() : null;
  if (fit) term.loadAddon(fit);
  term.open(el);
  if (fit) fit.fit();
  term.focus();

  var base = el.getAttribute("data-prefix");
  var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + base + "pty";
  var ws = null, delay = 500, ended = false;
  var enc = new TextEncoder();

  function say(text) { if (status) status.textContent = text; }
  function sendSize() {
    if (ws && ws.readyState === 1) ws.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
  }
  function connect() {
    say("connecting…");
    ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    ws.onopen = function () { delay = 500; say("connected"); term.reset(); sendSize(); };
    ws.onmessage = function (ev) {
      if (typeof ev.data !== "string") term.write(new Uint8Array(ev.data));
    };
    ws.onclose = function (ev) {
      if (ev.code === 1000) { ended = true; say("the shell exited: the session has ended"); return; }
      if (ev.code === 4000) { say("another window took over this terminal"); return; }
      say("disconnected: reconnecting…");
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    };
  }
  // Typed keys and pasted text both arrive here (xterm.js handles paste
  // and bracketed paste itself).
  term.onData(function (d) { if (ws && ws.readyState === 1) ws.send(enc.encode(d)); });
  term.onResize(sendSize);
  window.addEventListener("resize", function () { if (fit && !ended) fit.fit(); });
  connect();
})();
