"""Share a GPU with other training jobs, one iteration at a time.

gpuportal's node agent serves a gate to the jobs that opted in to Salus
sharing: jobs whose GPU memory fits side by side take turns in a lane, at
most one iteration per lane at a time. Ask the gate before each training
iteration and tell it after:

    import gpuportal_gate
    gate = gpuportal_gate.connect()
    for batch in loader:
        with gate.iteration(expected_e_mib=4096, measure_torch=True):
            train_step(batch)

expected_e_mib is the ephemeral memory (activations, workspace) the
iteration needs, 0 if unknown: the gate keeps a lane at least that large
for the job. With measure_torch=True the client waits for the GPU to
finish the iteration, measures its ephemeral peak with PyTorch and
reports it; on a PyTorch without CUDA (or with no GPU visible) there is
no GPU memory to measure, and the client says so once on stderr and
reports no peak. Without measure_torch, wait for the GPU yourself (for
example torch.cuda.synchronize()) before the block ends, and report a
peak you measured through the object the block gives:

    with gate.iteration(expected_e_mib=4096) as it:
        it.peak_e_mib = train_step(batch)

A job that outgrows its lane gets StopJob: the agent stops it and has it
run again with a larger estimate. Outside gpuportal, or in a job that did
not opt in (no GPUPORTAL_GATE in the environment), connect() returns a
gate that does nothing, so the same script runs anywhere.

Python 3 standard library only. Download it from a gpuportal server at
/static/clients/gpuportal_gate.py. The protocol is described in
docs/salus.md and in the Go package core/agent/gate.
"""

import json
import math
import os
import socket
import sys
import threading
import time

__all__ = ["connect", "Gate", "Iteration", "GateError", "StopJob"]

VERSION = 1
MAX_LINE_BYTES = 4096
MIB = 1 << 20


class GateError(Exception):
    """The gate refused a request, or the connection to it failed."""


class StopJob(GateError):
    """The job outgrew its lane: the agent stops it and runs it again
    with a larger memory estimate."""


def connect(timeout=30.0):
    """Connect to the gate named by the environment, or return a gate
    that does nothing when there is none (GPUPORTAL_GATE unset)."""
    path = os.environ.get("GPUPORTAL_GATE", "")
    if not path:
        return Gate(None)
    job = int(os.environ.get("GPUPORTAL_JOB_ID", "0") or 0)
    token = os.environ.get("GPUPORTAL_GATE_TOKEN", "")
    return Gate(path, job=job, token=token, timeout=timeout)


class Iteration:
    """One iteration granted by the gate. Set peak_e_mib to the ephemeral
    peak the iteration measured, in MiB, before the block ends."""

    def __init__(self, reply):
        self.peak_e_mib = 0
        self.lane_mib = reply.get("lane_mib", 0)
        self.lane_jobs = reply.get("lane_jobs", 1)
        self.waited_ms = reply.get("waited_ms", 0)


class Gate:
    """A connection to the agent's gate. Gate(None) does nothing."""

    def __init__(self, path, job=0, token="", timeout=30.0):
        self.enabled = bool(path)
        self.job = job
        self.gpus = []
        self.policy = ""
        self._lock = threading.Lock()
        self._sock = None
        self._file = None
        self._torch = None
        self._torch_checked = False
        if not self.enabled:
            return
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(path)
            # Waiting for an iteration may take long: no timeout after
            # the hello.
            self._sock, self._file = sock, sock.makefile("rb")
        except OSError as e:
            raise GateError("cannot reach the gate at %s: %s" % (path, e)) from e
        reply = self._call({"op": "hello", "job": job, "token": token})
        sock.settimeout(None)
        self.gpus = reply.get("gpus", [])
        self.policy = reply.get("policy", "")

    def acquire(self, expected_e_mib=0):
        """Wait until an iteration may run; return the gate's reply."""
        if not self.enabled:
            return {"ok": True, "lane_jobs": 1}
        return self._call({"op": "acquire", "expected_e_mib": int(expected_e_mib)})

    def release(self, peak_e_mib=0):
        """Say the iteration ended, with its measured ephemeral peak."""
        if not self.enabled:
            return {"ok": True}
        return self._call({"op": "release", "peak_e_mib": int(math.ceil(peak_e_mib))})

    def iteration(self, expected_e_mib=0, measure_torch=False):
        """A context manager around one iteration: acquire on entry,
        release on exit."""
        return _IterationBlock(self, expected_e_mib, measure_torch)

    def close(self):
        """Close the connection; an iteration still held ends."""
        with self._lock:
            if self._sock is not None:
                self._file.close()
                self._sock.close()
                self._sock = self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _call(self, request):
        request["v"] = VERSION
        line = json.dumps(request, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            if self._sock is None:
                raise GateError("the connection to the gate is closed")
            try:
                self._sock.sendall(line)
                answer = self._file.readline(MAX_LINE_BYTES + 1)
            except BaseException as e:
                # A reply may be on its way: the connection cannot be reused.
                self._file.close()
                self._sock.close()
                self._sock = self._file = None
                if isinstance(e, OSError):
                    raise GateError("gate: %s" % e) from e
                raise
        if not answer:
            self.close()
            raise GateError("the gate closed the connection")
        try:
            reply = json.loads(answer)
        except ValueError as e:
            self.close()
            raise GateError("gate: bad reply %r" % answer[:200]) from e
        if reply.get("stop"):
            raise StopJob(reply.get("error", "the job outgrew its lane"))
        if not reply.get("ok"):
            self.close()
            raise GateError(reply.get("error", "refused"))
        return reply

    def _torch_cuda(self):
        """PyTorch, when it can measure GPU memory; None when it cannot
        (no CUDA in this build, or no GPU visible), said once."""
        if not self._torch_checked:
            self._torch_checked = True
            import torch  # only with measure_torch=True

            if torch.cuda.is_available():
                self._torch = torch
            else:
                print(
                    "gpuportal_gate: measure_torch=True, but PyTorch sees no CUDA GPU: "
                    "iterations are not measured",
                    file=sys.stderr,
                    flush=True,
                )
        return self._torch


class _IterationBlock:
    def __init__(self, gate, expected_e_mib, measure_torch):
        self.gate = gate
        self.expected = expected_e_mib
        self.torch = gate._torch_cuda() if measure_torch and gate.enabled else None
        self.it = None
        self.base = 0

    def __enter__(self):
        self.it = Iteration(self.gate.acquire(self.expected))
        torch = self.torch
        if torch is not None:
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        return self.it

    def __exit__(self, kind, value, tb):
        torch = self.torch
        if torch is not None:
            # The lane is free only once the GPU finished the iteration.
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - self.base
            self.it.peak_e_mib = max(self.it.peak_e_mib, peak / MIB)
            if self.it.lane_jobs > 1:
                # Give the cached activations back to the lane's next job.
                torch.cuda.empty_cache()
        peak = self.it.peak_e_mib if kind is None else 0
        try:
            self.gate.release(peak)
        except GateError:
            if kind is None:
                raise
        return False
