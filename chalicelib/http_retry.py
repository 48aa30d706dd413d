"""Retry policy shared by Engram's HTTP clients of model services (embeddings, chat): which statuses to retry,
how long to wait, and how to read an upstream error body.

Timing follows the openai-python SDK (``INITIAL_RETRY_DELAY`` 0.5 s, ``MAX_RETRY_DELAY`` 8 s, ``Retry-After``
honoured up to 60 s), so Engram backs off exactly like the official client would.
"""

from __future__ import annotations

import email.utils
import math
import random
import time

import httpx

INITIAL_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0
MAX_RETRY_AFTER_S = 60.0
# Request timeout, rate limit and server errors: retried (the openai SDK's set).
RETRYABLE_STATUS = frozenset({408, 429}) | frozenset(range(500, 600))


def backoff_s(attempt: int) -> float:
    """Seconds to wait before retry ``attempt + 1``: ``min(0.5 · 2^attempt, 8)`` × jitter in (0.75, 1]."""
    return min(INITIAL_RETRY_DELAY_S * 2.0**attempt, MAX_RETRY_DELAY_S) * (1.0 - 0.25 * random.random())


def retry_after_s(headers: httpx.Headers) -> float | None:
    """The server's requested wait in seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP
    date), or None when absent, unparsable, or outside (0, 60] seconds."""
    wait: float | None = None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            wait = float(raw_ms) / 1000.0
        except ValueError:
            wait = None
    raw = headers.get("retry-after")
    if wait is None and raw is not None:
        try:
            wait = float(raw)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None:
                wait = when.timestamp() - time.time()
    if wait is None or not math.isfinite(wait) or not 0.0 < wait <= MAX_RETRY_AFTER_S:
        return None
    return wait


def server_message(response: httpx.Response) -> tuple[str, str | None]:
    """(message, code) from an error body: OpenAI's ``{"error": {"message", "code"}}``, a bare
    ``{"error": "..."}`` / ``{"detail": ...}`` (other servers), or the first 500 characters of the text."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        err = payload.get("error", payload.get("detail"))
        if isinstance(err, dict) and err.get("message"):
            code = err.get("code")
            return str(err["message"]), code if isinstance(code, str) else None
        if isinstance(err, str) and err:
            return err, None
        if err is not None:
            return str(err)[:500], None
    text = response.text.strip()
    return (text[:500] if text else response.reason_phrase or "no message"), None
