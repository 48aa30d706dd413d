"""Health checks, answered alike by the API (``app.py``) and the streaming front, without an API key.

- Liveness, ``GET /health/live``: the process answers. Always ``200 {"status": "ok"}``; touches nothing, so it
  stays up while the database is down (restarting a process does not bring a database back). The streaming
  front's Lambda Web Adapter waits for it at start (``AWS_LWA_READINESS_CHECK_PATH``): a front started during an
  outage must come up to answer 503s.
- Readiness, ``GET /health``: the process can serve requests, i.e. a pooled database connection answers
  ``SELECT 1``. ``200 {"status": "ok", "database": {"status": "ok", "latency_ms": 0.4}}``, else ``503
  {"status": "unavailable", "database": {"status": "unavailable", "error": "<kind>"}}`` with ``Retry-After`` —
  within the pool's wait (``ENGRAM_DB_POOL_TIMEOUT_S``), sooner when the connection is refused. ``<kind>`` is the
  exception's class (e.g. ``DatabaseUnreachable``, ``PoolTimeout``, ``EmbeddedDatabaseError``); the details go to
  the log, not to callers without a key.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from chalicelib.config import Settings
from chalicelib.errors import RETRY_AFTER_S

__all__ = ["HEALTH_PATH", "LIVE", "LIVE_PATH", "readiness"]

logger = logging.getLogger("engram.api")

HEALTH_PATH = "/health"
LIVE_PATH = "/health/live"
# The liveness answer.
LIVE = {"status": "ok"}


def readiness(settings: Settings) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The readiness answer for ``settings``' database: ``(status, body, headers)`` — 200 and the round trip's
    latency (milliseconds, checkout included), or 503 with ``Retry-After`` (seconds) and the kind of failure.
    Never raises."""
    from chalicelib.store.db import ping

    try:
        seconds = ping(settings)
    except psycopg.OperationalError as exc:
        logger.warning("readiness: database unavailable: %s: %s", type(exc).__name__, str(exc).strip()[:500])
        return _unavailable(exc)
    except Exception as exc:  # a readiness check answers; what broke is logged
        logger.exception("readiness: database check failed")
        return _unavailable(exc)
    return 200, {"status": "ok", "database": {"status": "ok", "latency_ms": round(seconds * 1000, 1)}}, {}


def _unavailable(exc: BaseException) -> tuple[int, dict[str, Any], dict[str, str]]:
    body = {"status": "unavailable", "database": {"status": "unavailable", "error": type(exc).__name__}}
    return 503, body, {"Retry-After": str(RETRY_AFTER_S)}
