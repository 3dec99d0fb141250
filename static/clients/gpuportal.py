"""Submit, follow and cancel gpuportal jobs from Python.

    import gpuportal
    gp = gpuportal.Client()  # GPUPORTAL_URL and GPUPORTAL_TOKEN
    job = gp.submit(name="resnet", command=["python", "train.py"], gpus=2)
    for text in gp.stream_logs(job["id"]):
        print(text, end="")
    job = gp.wait(job["id"], check=True)  # JobFailed unless it succeeded
    print(job["state"], job["jct_s"])

A token comes from the portal (Settings, or `gpuportal login`), from
`Client.login(url, user, password)` (HTTP basic auth, the same password
as the login page's), or from the environment: GPUPORTAL_URL is the
portal's address (https://gpus.example.org), GPUPORTAL_TOKEN the token.

Jobs are the API's JSON objects as dicts (the fields of the portal's
/api/v1/openapi.json: id, state, reason, exit_code, ...). A refusal raises
APIError, or the subclass of its HTTP status (Invalid, Unauthorized,
Forbidden, NotFound, Conflict, TooManyRequests, Unavailable), carrying
the API's message and the field it names: `err.field == "gpus"`,
`err.message == "gpus: must be at least 1"`. A portal that cannot be
reached raises ConnectionFailed.

Python 3.8 or later, standard library only. Download it from a gpuportal
server at /static/clients/gpuportal.py, or install it from the
repository: `pip install ./static/clients` (with gpuportal_gate).
"""

import base64
import codecs
import json
import os
import re
import socket
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = [
    "Client", "Error", "ConfigError", "ConnectionFailed", "APIError", "Invalid",
    "Unauthorized", "Forbidden", "NotFound", "Conflict", "TooManyRequests",
    "Unavailable", "WaitTimeout", "JobFailed", "FINAL_STATES",
]

__version__ = "0.1.0"

# FINAL_STATES are the states a job never leaves.
FINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "timed_out"})


class Error(Exception):
    """Every error of this module."""


class ConfigError(Error):
    """No portal address or token was given, nor found in the environment."""


class ConnectionFailed(Error):
    """The portal could not be reached, or did not answer in time."""


class APIError(Error):
    """The portal refused a request.

    status is the HTTP status, message the API's error message, field the
    request's field it names (None when it names none), method and path
    the request's."""

    def __init__(self, status, message, method="", path=""):
        self.status = status
        self.message = message
        self.field = _field_of(message)
        self.method = method
        self.path = path
        super().__init__("%s %s: %d %s" % (method, path, status, message))


class Invalid(APIError):
    """400: the request is not valid; field names what is wrong."""


class Unauthorized(APIError):
    """401: no token, an expired or revoked one, or a wrong password."""


class Forbidden(APIError):
    """403: the account may not do this."""


class NotFound(APIError):
    """404: no such job (or one the account may not see)."""


class Conflict(APIError):
    """409: the job is not in a state that allows this (a finished job
    cancelled)."""


class TooManyRequests(APIError):
    """429: too many requests or failed logins; retry_after is the wait in
    seconds the portal asked for, or None."""

    retry_after = None


class Unavailable(APIError):
    """502, 503, 504: the portal cannot serve this now (a replica that is
    not the leader, an identity source down); retry_after as for
    TooManyRequests."""

    retry_after = None


class WaitTimeout(Error):
    """wait or stream_logs ran out of time; job is the job as last seen."""

    def __init__(self, job, timeout):
        self.job = job
        super().__init__("job %s still %s after %gs" % (job.get("id"), job.get("state"), timeout))


class JobFailed(Error):
    """wait(check=True): the job ended other than succeeded; job is it."""

    def __init__(self, job):
        self.job = job
        detail = job.get("reason") or ""
        if job.get("exit_code") is not None:
            detail = ("exit code %s. %s" % (job["exit_code"], detail)).strip()
        super().__init__("job %s %s%s" % (job.get("id"), job.get("state"), ": " + detail if detail else ""))


_STATUS_ERRORS = {
    400: Invalid, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: Invalid, 415: Invalid, 422: Invalid, 429: TooManyRequests,
    502: Unavailable, 503: Unavailable, 504: Unavailable,
}

_FIELD = re.compile(r"^([a-z][a-z0-9_]*(?:\.[a-z0-9_]+|\[\d+\])*): ")


def _field_of(message):
    """The field an API message names: "gpus: must be at least 1" names
    gpus, "unknown field \"gpu\"" names gpu."""
    m = _FIELD.match(message or "")
    if m:
        return m.group(1)
    m = re.match(r'^unknown field "([^"]+)"', message or "")
    return m.group(1) if m else None


class _Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8")) if self.body else None


class Client:
    """A portal and the token the requests carry.

    url and token default to GPUPORTAL_URL and GPUPORTAL_TOKEN; timeout
    bounds each request in seconds."""

    def __init__(self, url=None, token=None, timeout=30.0):
        url = url or os.environ.get("GPUPORTAL_URL", "")
        token = token or os.environ.get("GPUPORTAL_TOKEN", "")
        if not url:
            raise ConfigError("no portal address: pass url= or set GPUPORTAL_URL (https://gpus.example.org)")
        if not token:
            raise ConfigError("no API token: pass token=, set GPUPORTAL_TOKEN, or use Client.login(url, user, password)")
        self.url = _base(url)
        self.token = token
        self.timeout = timeout

    def __repr__(self):
        return "gpuportal.Client(%r)" % self.url

    @classmethod
    def login(cls, url=None, user=None, password=None, timeout=30.0):
        """A client with a new token for user and password (HTTP basic
        auth; the portal's local or directory password). url defaults to
        GPUPORTAL_URL, user to GPUPORTAL_USER."""
        url = url or os.environ.get("GPUPORTAL_URL", "")
        user = user or os.environ.get("GPUPORTAL_USER", "")
        if not url:
            raise ConfigError("no portal address: pass url= or set GPUPORTAL_URL")
        if not user or password is None:
            raise ConfigError("login needs a user name and a password")
        basic = base64.b64encode(("%s:%s" % (user, password)).encode("utf-8")).decode("ascii")
        resp = _request(_base(url), "POST", "/tokens", None, None, {"Authorization": "Basic " + basic}, timeout)
        return cls(url, resp.json()["token"], timeout)

    def logout(self):
        """Revoke this client's token; it serves no more requests."""
        self._call("DELETE", "/tokens/current")

    def me(self):
        """Who the token belongs to: name, role, team, ..."""
        return self._call("GET", "/me").json()

    def submit(self, spec=None, **fields):
        """Submit a job and return it (queued). spec is a dict of the
        API's SubmitRequest (name, command, gpus, image, env, ...);
        keyword arguments add to it: submit(name="x", command="python
        train.py", gpus=1)."""
        body = dict(spec or {})
        body.update(fields)
        return self._call("POST", "/jobs", body=body).json()

    def job(self, job_id):
        """The job as it is now."""
        return self._call("GET", "/jobs/%d" % int(job_id)).json()

    def jobs(self, scope=None, state=None, user=None, team=None, q=None, limit=None):
        """The jobs the account may see, newest first: scope "mine",
        "team" or "all" (admins); state a state or a list of them; q the
        search of the jobs page. Every page is read unless limit caps the
        number returned."""
        if isinstance(state, (list, tuple, set, frozenset)):
            state = ",".join(state)
        query = {k: v for k, v in (("scope", scope), ("state", state), ("user", user), ("team", team), ("q", q)) if v}
        out = []
        while True:
            if limit is not None:
                query["limit"] = max(1, min(1000, limit - len(out)))
            resp = self._call("GET", "/jobs", query=query)
            out.extend(resp.json() or [])
            cursor = resp.headers.get("X-Next-Cursor")
            if not cursor or (limit is not None and len(out) >= limit):
                return out[:limit] if limit is not None else out
            query["cursor"] = cursor

    def cancel(self, job_id):
        """Cancel the job (a running one is stopped) and return it.
        Conflict when it has already ended."""
        return self._call("DELETE", "/jobs/%d" % int(job_id)).json()

    def wait(self, job_id, timeout=None, poll=2.0, check=False):
        """Wait until the job ends and return it. WaitTimeout after
        timeout seconds (None: no limit); with check, JobFailed unless it
        succeeded."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["state"] in FINAL_STATES:
                if check and job["state"] != "succeeded":
                    raise JobFailed(job)
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(job, timeout)
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))

    def logs(self, job_id, tail_bytes=None):
        """The end of the job's output (64 KiB unless tail_bytes says)."""
        query = {"tail_bytes": int(tail_bytes)} if tail_bytes else None
        return self._call("GET", "/jobs/%d/logs" % int(job_id), query=query).body.decode("utf-8", "replace")

    def stream_logs(self, job_id, follow=True, poll=1.0, timeout=None):
        """The job's output as it comes, in pieces of text, from its
        start; with follow, until the job has ended and all its output is
        read (WaitTimeout after timeout seconds), else what there is now.
        A job that has not started yet has no output: it is waited for."""
        job_id = int(job_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        offset = 0
        ended = False
        while True:
            try:
                resp = self._call("GET", "/jobs/%d/logs" % job_id, query={"offset": offset})
                size = int(resp.headers.get("X-Log-Size") or 0)
                if size < offset:
                    # The output started anew (the job's next run).
                    offset = 0
                    decoder.reset()
                    continue
                chunk = resp.body
            except NotFound:
                self.job(job_id)  # NotFound again when the job itself is not there
                chunk = b""
            if chunk:
                offset += len(chunk)
                text = decoder.decode(chunk)
                if text:
                    yield text
                continue
            if ended or not follow:
                rest = decoder.decode(b"", final=True)
                if rest:
                    yield rest
                return
            job = self.job(job_id)
            # Read once more after the job ended: its last lines may have
            # come after the previous read.
            ended = job["state"] in FINAL_STATES
            if ended:
                continue
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout(job, timeout)
            time.sleep(poll)

    def _call(self, method, path, query=None, body=None):
        return _request(self.url, method, path, query, body, {"Authorization": "Bearer " + self.token}, self.timeout)


def _base(url):
    url = url.rstrip("/")
    if not re.match(r"^https?://[^/]+", url):
        raise ConfigError("portal address %r: want http(s)://HOST[:PORT]" % url)
    return url


def _request(base, method, path, query, body, headers, timeout):
    url = base + "/api/v1" + path
    if query:
        url += "?" + urllib.parse.urlencode(query)
    data = None
    headers = dict(headers)
    headers["Accept"] = "application/json"
    headers["User-Agent"] = "gpuportal-python/" + __version__
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return _Response(resp.status, resp.headers, resp.read())
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            message = json.loads(raw.decode("utf-8"))["error"]
        except (ValueError, KeyError, TypeError):
            message = raw.decode("utf-8", "replace").strip() or e.reason
        err = _STATUS_ERRORS.get(e.code, APIError)(e.code, message, method, path)
        retry = e.headers.get("Retry-After") if e.headers else None
        if retry and retry.isdigit() and isinstance(err, (TooManyRequests, Unavailable)):
            err.retry_after = int(retry)
        raise err from None
    except (urllib.error.URLError, socket.timeout, ConnectionError) as e:
        reason = getattr(e, "reason", e)
        raise ConnectionFailed("%s %s: cannot reach the portal: %s" % (method, base, reason)) from None
