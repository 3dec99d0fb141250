"""A user's web app for the session tests: every path answers the page
that runs attack.js against the portal ($PORTAL), and sw.js a service
worker that would answer every page of its scope with a phishing page."""
import http.server
import os

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "attack.js"), encoding="utf-8") as f:
    SCRIPT = f.read()
PAGE = ("<!doctype html><html><head><meta charset='utf-8'><title>loading</title></head>"
        "<body><h1>alice's app</h1><pre id='result'></pre><script>" + SCRIPT +
        "attack(" + repr(os.environ["PORTAL"]) + ").then(function (r) {"
        " document.getElementById('result').textContent = JSON.stringify(r, null, 1);"
        " document.title = 'done ' + JSON.stringify(r); });</script></body></html>").encode()
WORKER = (b"self.addEventListener('fetch', function (e) { e.respondWith(new Response("
          b"'<h1>Your session expired: enter your password</h1>', {headers: {'Content-Type': 'text/html'}})); });")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body, kind = (WORKER, "text/javascript") if self.path.endswith("/sw.js") else (PAGE, "text/html")
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Service-Worker-Allowed", "/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
