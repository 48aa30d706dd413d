"""Request observability: structured JSON logs and CloudWatch EMF metrics through aws-lambda-powertools.

Register :func:`observe` as the **outermost** ``http`` middleware (i.e. before ``render_errors``) so it sees the
final status of every response::

    app.register_middleware(observe, "http")
    app.register_middleware(render_errors, "http")

Per request it

* picks a request id (API Gateway ``requestContext.requestId``, else the ``x-request-id`` header, else a uuid4),
  attaches ``request_id``/``path``/``method`` (and later ``tenant``) to every log line of the ``engram`` logger
  tree for the rest of the request, and echoes it back as the ``x-request-id`` response header;
* writes one JSON log line (``message == "request"``) with method, route (resource path, low cardinality), path
  (raw path), status, latency_ms, tenant;
* writes exactly one EMF document to stdout (Lambda ships stdout to CloudWatch Logs, which extracts the metrics)
  with ``RequestLatency`` (Milliseconds), ``Requests``/``Errors4xx``/``Errors5xx`` (Count, 0 or 1), plus whatever
  the route :func:`record`-ed, under the single default ``service`` dimension; route, method, status, path,
  request id and tenant travel as EMF metadata (searchable in Logs Insights, no dimension cardinality).

Concurrency. Powertools' ``Metrics`` keeps its buffer in class-level state shared by every instance, so two
requests on the threaded local server would publish each other's metrics. Inside a request metrics therefore go
into a request-private ``AmazonCloudWatchEMFProvider`` held in a :class:`~contextvars.ContextVar` (no global lock
on the hot path). The module-level ``metrics`` singleton is only used by :func:`record` *outside* a request, where
the add+flush pair runs under a lock and is published immediately as its own document. Log keys go through the
powertools ``thread_safe_*`` API (a ContextVar too), never the process-wide ``append_keys``. Note that worker
threads started from a route do not inherit the request context (unless run via ``contextvars.copy_context()``),
so their :func:`record` calls are published on their own.

Lightness. Nothing from powertools is imported until the first request / log / metric: ``logger`` and ``metrics``
are built on first attribute access (module ``__getattr__``).

Switches. ``ENGRAM_METRICS=off`` (also ``0``/``false``/``no``) is read once at import; :func:`configure` overrides
it at runtime. Powertools' own ``POWERTOOLS_METRICS_DISABLED`` / ``POWERTOOLS_DEV`` are honoured as well. Logging
stays on either way (level from ``POWERTOOLS_LOG_LEVEL``/``LOG_LEVEL``, default INFO).
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    from aws_lambda_powertools import Logger, Metrics
    from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider
    from chalice.app import Request, Response

__all__ = [
    "ERRORS_4XX",
    "ERRORS_5XX",
    "NAMESPACE",
    "QUERY_EMBEDDING_LATENCY",
    "REQUESTS",
    "REQUEST_LATENCY",
    "RESULTS_RETURNED",
    "SEARCH_LATENCY",
    "SERVICE",
    "configure",
    "current_request_id",
    "get_logger",
    "get_metrics",
    "log_to_stderr",
    "metrics_enabled",
    "observe",
    "record",
    "set_tenant",
]

SERVICE = "engram"
NAMESPACE = "Engram"

REQUEST_LATENCY = "RequestLatency"
SEARCH_LATENCY = "SearchLatency"
QUERY_EMBEDDING_LATENCY = "QueryEmbeddingLatency"
RESULTS_RETURNED = "ResultsReturned"
REQUESTS = "Requests"
ERRORS_4XX = "Errors4xx"
ERRORS_5XX = "Errors5xx"

REQUEST_ID_HEADER = "x-request-id"

_OFF = {"off", "0", "false", "no", "disabled"}
_metrics_on: bool = os.environ.get("ENGRAM_METRICS", "on").strip().lower() not in _OFF
# Outside a request, points are published only inside AWS Lambda (event handlers), where stdout is CloudWatch's;
# on a workstation stdout belongs to the CLI (e.g. `engram search --json`), so such points are dropped.
_publish_outside_requests: bool = "AWS_LAMBDA_FUNCTION_NAME" in os.environ

_internal = logging.getLogger("engram.observability")  # failures of this module itself; never raised

_build_lock = threading.Lock()  # one-time construction of the powertools objects
_metrics_lock = threading.Lock()  # guards add+flush on the shared powertools Metrics singleton
_logger: Logger | None = None
_metrics: Metrics | None = None

_tenant: contextvars.ContextVar[str | None] = contextvars.ContextVar("engram_tenant", default=None)


@dataclass
class _RequestState:
    request_id: str
    started: float
    provider: AmazonCloudWatchEMFProvider | None
    lock: threading.Lock = field(default_factory=threading.Lock)


_request: contextvars.ContextVar[_RequestState | None] = contextvars.ContextVar("engram_request", default=None)


class _Stdout:
    """The log stream: ``sys.stdout`` (or ``sys.stderr`` after :func:`log_to_stderr`) resolved at write time, so
    redirection and pytest's capsys keep working after the handler was built. Writes are buffered per thread and
    whole lines go out under one lock, so records from concurrent requests never share a line."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        pending = getattr(self._local, "pending", "") + text
        head, newline, tail = pending.rpartition("\n")
        self._local.pending = tail
        if newline:
            with self._lock:
                target = sys.stderr if _to_stderr else sys.stdout
                target.write(head + newline)
                target.flush()
        return len(text)

    def flush(self) -> None:
        pass  # whole lines are flushed as they complete


_to_stderr = False


def log_to_stderr(enabled: bool = True) -> None:
    """Send log lines to stderr instead of stdout (the CLI, whose stdout is its output); ``False`` restores stdout.
    Never raises."""
    global _to_stderr
    _to_stderr = enabled


# --------------------------------------------------------------------------------------------------- public API


def configure(enabled: bool) -> None:
    """Turn EMF metric output on or off for the whole process (overrides ``ENGRAM_METRICS``).

    Logging is unaffected. Takes effect for requests that start afterwards. Never raises.
    """
    global _metrics_on
    _metrics_on = bool(enabled)


def metrics_enabled() -> bool:
    """Whether EMF metric output is currently on (see :func:`configure`). Never raises."""
    return _metrics_on


def get_logger() -> Logger:
    """The process-wide powertools ``Logger(service="engram")``, built on first use; JSON lines to stdout.

    Its Python logger is ``engram``, so ``logging.getLogger("engram.<anything>")`` records are formatted by it too
    and carry the request keys. Raises only if powertools itself fails to import.
    """
    global _logger
    if _logger is None:
        with _build_lock:
            if _logger is None:
                from aws_lambda_powertools.logging import Logger

                _logger = Logger(service=SERVICE, stream=_Stdout())  # type: ignore[arg-type]
    return _logger


def get_metrics() -> Metrics:
    """The process-wide powertools ``Metrics(namespace="Engram", service="engram")``, built on first use.

    Its buffer is shared by every powertools ``Metrics`` instance in the process; inside requests prefer
    :func:`record`. Raises only if powertools itself fails to import.
    """
    global _metrics
    if _metrics is None:
        with _build_lock:
            if _metrics is None:
                from aws_lambda_powertools.metrics import Metrics

                _metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
    return _metrics


def __getattr__(name: str) -> Any:
    """Lazy module attributes ``logger`` and ``metrics`` (see :func:`get_logger`, :func:`get_metrics`)."""
    if name == "logger":
        return get_logger()
    if name == "metrics":
        return get_metrics()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def current_request_id() -> str | None:
    """The id of the request being handled on this thread/context, or ``None`` outside a request. Never raises."""
    state = _request.get()
    return state.request_id if state is not None else None


def set_tenant(tenant: str | None) -> None:
    """Record the caller's tenant for the rest of the current request (called by the auth layer).

    The value is added to every subsequent log line of this request (key ``tenant``), to the per-request log line
    and to the request's EMF metadata. Isolated per thread/context (ContextVar). ``None`` clears it. Outside a
    request it still applies to the current context until the next request starts. Never raises.
    """
    try:
        _tenant.set(tenant)
        log = get_logger()
        if tenant is None:
            log.thread_safe_remove_keys(["tenant"])
        else:
            log.thread_safe_append_keys(tenant=tenant)
    except Exception:
        _internal.debug("set_tenant failed", exc_info=True)


def record(name: str, value: float, unit: str = "Milliseconds") -> None:
    """Add one metric data point.

    ``value`` is in ``unit``, any CloudWatch unit name (``"Milliseconds"`` default, ``"Count"``, ``"Bytes"``, ...).
    Inside a request the point joins that request's single EMF document, flushed by :func:`observe` when the
    request ends. Outside a request (ingestion events, worker threads without the request context) it is
    published immediately as its own EMF document when running in AWS Lambda, and dropped elsewhere (the CLI's
    stdout is its output). A no-op while metrics are disabled.

    Never raises: an invalid name, unit or value is dropped and reported on the ``engram.observability`` logger
    at WARNING.
    """
    if not _metrics_on:
        return
    try:
        state = _request.get()
        if state is not None and state.provider is not None:
            with state.lock:
                state.provider.add_metric(name=name, unit=unit, value=float(value))
            return
        if not _publish_outside_requests:
            return
        shared = get_metrics()
        with _metrics_lock:
            try:
                shared.add_metric(name=name, unit=unit, value=float(value))
            finally:
                if shared.metric_set:  # flushing an empty set only emits a powertools warning
                    shared.flush_metrics()
    except Exception:
        _internal.warning("dropped metric %r=%r %s", name, value, unit, exc_info=True)


def observe(event: Request, get_response: Callable[[Request], Response]) -> Response:
    """Chalice ``http`` middleware: request id, timing, one JSON log line and one EMF document per request.

    Latency is wall-clock milliseconds around ``get_response``. Adds the ``x-request-id`` response header (unless
    the route set one). Exceptions from ``get_response`` propagate unchanged (after being logged and counted with
    their ``status``/``STATUS_CODE`` attribute, else 500); failures inside the observability code itself are
    swallowed, so they can never change the response.
    """
    state = _begin(event)
    try:
        response = get_response(event)
    except BaseException as exc:
        _finish(state, event, None, exc)
        raise
    _finish(state, event, response, None)
    return response


# --------------------------------------------------------------------------------------------------- internals


def _begin(event: Any) -> _RequestState | None:
    try:
        request_id = _request_id(event)
        provider = None
        if _metrics_on:
            from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
                AmazonCloudWatchEMFProvider,
            )

            provider = AmazonCloudWatchEMFProvider(namespace=NAMESPACE, service=SERVICE)
        state = _RequestState(request_id=request_id, started=time.perf_counter(), provider=provider)
        _request.set(state)
        _tenant.set(None)
        log = get_logger()
        log.thread_safe_clear_keys()  # a reused Lambda/worker context must not carry the previous request's keys
        log.thread_safe_append_keys(
            request_id=request_id,
            path=_raw_path(event),
            method=getattr(event, "method", None),
        )
        return state
    except Exception:
        _internal.debug("observability begin failed", exc_info=True)
        return None


def _finish(state: _RequestState | None, event: Any, response: Any, exc: BaseException | None) -> None:
    try:
        if state is None:
            return
        latency_ms = (time.perf_counter() - state.started) * 1000.0
        status = _status(response, exc)
        tenant = _tenant.get()
        route = getattr(event, "path", None)  # Chalice: the resource path, e.g. /v1/vector_stores/{id}
        method = getattr(event, "method", None)
        raw_path = _raw_path(event)

        if response is not None:
            _safe(_add_header, response, state.request_id)
        _safe(_log_line, method, route, raw_path, status, latency_ms, tenant, exc)
        _safe(_emit_metrics, state, route, method, raw_path, status, latency_ms, tenant)
    except Exception:
        _internal.debug("observability finish failed", exc_info=True)
    finally:
        try:
            _request.set(None)
            _tenant.set(None)
            get_logger().thread_safe_clear_keys()
        except Exception:
            pass


def _safe(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        _internal.debug("observability step %s failed", getattr(fn, "__name__", fn), exc_info=True)


def _add_header(response: Any, request_id: str) -> None:
    headers = response.headers
    if not any(key.lower() == REQUEST_ID_HEADER for key in headers):
        headers[REQUEST_ID_HEADER] = request_id


def _log_line(
    method: str | None,
    route: str | None,
    raw_path: str | None,
    status: int,
    latency_ms: float,
    tenant: str | None,
    exc: BaseException | None,
) -> None:
    extra = {
        "route": route,
        "status": status,
        "latency_ms": round(latency_ms, 3),
        "tenant": tenant,
    }
    if exc is not None:
        extra["error_type"] = type(exc).__name__
    log = get_logger()
    (log.error if status >= 500 else log.info)("request", extra=extra)


def _emit_metrics(
    state: _RequestState,
    route: str | None,
    method: str | None,
    raw_path: str | None,
    status: int,
    latency_ms: float,
    tenant: str | None,
) -> None:
    provider = state.provider
    if provider is None or not _metrics_on:
        return
    with state.lock:
        provider.add_metric(name=REQUEST_LATENCY, unit="Milliseconds", value=latency_ms)
        provider.add_metric(name=REQUESTS, unit="Count", value=1)
        provider.add_metric(name=ERRORS_4XX, unit="Count", value=1 if 400 <= status < 500 else 0)
        provider.add_metric(name=ERRORS_5XX, unit="Count", value=1 if status >= 500 else 0)
        for key, value in (
            ("route", route),
            ("method", method),
            ("status", status),
            ("path", raw_path),
            ("request_id", state.request_id),
            ("tenant", tenant),
        ):
            if value is not None:
                provider.add_metadata(key=key, value=value)
        if provider.metric_set:
            provider.flush_metrics()  # prints one EMF JSON line to stdout; honours POWERTOOLS_METRICS_DISABLED


def _request_id(event: Any) -> str:
    context = getattr(event, "context", None) or {}
    request_id = context.get("requestId") if isinstance(context, dict) else None
    if not request_id:
        headers = getattr(event, "headers", None)
        if headers is not None:
            request_id = headers.get(REQUEST_ID_HEADER)
    if request_id:
        request_id = str(request_id).strip()[:200]
        if request_id and "\n" not in request_id and "\r" not in request_id:
            return request_id
    return str(uuid.uuid4())


def _raw_path(event: Any) -> str | None:
    context = getattr(event, "context", None)
    if isinstance(context, dict) and context.get("path"):
        return str(context["path"])
    return getattr(event, "path", None)


def _status(response: Any, exc: BaseException | None) -> int:
    if exc is None:
        try:
            return int(response.status_code)
        except Exception:
            return 500
    for attr in ("status", "STATUS_CODE", "status_code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value <= 599:
            return value
    return 500
