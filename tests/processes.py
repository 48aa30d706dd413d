"""Helpers for tests that run Engram (or a server it talks to) as a subprocess: a free port, waiting until the
process answers its health check, and stopping it."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import httpx

__all__ = ["free_port", "stop", "wait_healthy"]


def free_port() -> int:
    """A TCP port of 127.0.0.1 nothing listens on right now (bound and released: another process could take it
    before it is used, which the process using it would report)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_healthy(root: str, child: subprocess.Popen, timeout_s: float) -> None:
    """Wait until ``GET {root}/health`` answers 200 (polled every 0.2 s, each try 2 s at most).

    Raises:
        AssertionError: ``child`` exited (with the end of its stderr, when piped), or ``timeout_s`` seconds
            passed.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if child.poll() is not None:
            stderr = child.stderr.read().decode()[-2000:] if child.stderr is not None else ""
            raise AssertionError(f"the process serving {root} exited: {stderr}")
        assert time.monotonic() < deadline, f"{root} did not answer its health check within {timeout_s} s"
        time.sleep(0.2)


def stop(child: subprocess.Popen, sig: signal.Signals = signal.SIGTERM, *, timeout_s: float = 30) -> None:
    """Send ``sig`` and wait up to ``timeout_s`` seconds for ``child`` to exit; kill it (and wait 10 s) if it
    does not."""
    child.send_signal(sig)
    try:
        child.wait(timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(10)
