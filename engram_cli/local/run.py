"""Engram's local stack wired together: the moto stack provisioned for ``app.py``'s event sources, the stack's
environment exported to this process, and the pump over the real handlers. Used by ``engram serve``, ``demo``
and ``pump``, and by the end-to-end tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chalicelib.config import Settings
from engram_cli.local.functions import FunctionSettings, read_function_settings
from engram_cli.local.pump import Pump
from engram_cli.local.stack import DEFAULT_BUCKET, DEFAULT_PORT, LocalStack, StackState, apply_env, load_state


def queue_roles() -> dict[str, str]:
    """Role → queue name for every queue of the message table (:data:`chalicelib.dispatch.table.QUEUES`), e.g.
    ``{"ingest": "engram-ingest", "embed": "engram-embed", "memory": "engram-memory"}``."""
    from chalicelib.dispatch.table import QUEUES

    return {spec.role: spec.name for spec in QUEUES}


def functions() -> FunctionSettings:
    """Stage and timeouts of ``app.py``'s event handlers from ``.chalice/config.json``."""
    import app as application

    return read_function_settings([source.name for source in application.app.event_sources])


def visibility_timeouts() -> dict[str, int]:
    """Queue name → visibility timeout (seconds): the consuming handler's Lambda timeout."""
    from chalice.app import SQSEventConfig

    import app as application

    timeouts = functions()
    return {source.queue: timeouts.timeout_s(source.name) for source in application.app.event_sources
            if isinstance(source, SQSEventConfig) and source.queue}


def start_stack(config: Settings, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                visibility_timeout_s: int | None = None, dsn: str | None = None) -> LocalStack:
    """Start moto for Engram: bucket ``config.bucket`` (default ``engram-local``), every queue of the message table
    (ingest, embed, memory) with its DLQ (``maxReceiveCount`` = ``config.max_receives``; visibility = each
    handler's Lambda timeout unless ``visibility_timeout_s``), the bucket notification, the DSN secret (``dsn``;
    default the configured database's URL, starting the embedded server). Writes the state file under
    ``config.data_dir`` and exports the stack's environment to this process (``chalicelib.config.settings()`` is
    re-read). ``.stop()`` stops it and restores the environment (clear the settings cache after it).

    Raises:
        OSError: the port is taken.
    """
    from chalicelib import config as config_module
    from chalicelib.store.db import database_url

    roles = queue_roles()
    stack = LocalStack(config.data_dir, queues=roles, notify_queue=roles["ingest"], max_receives=config.max_receives,
                       bucket=config.bucket or DEFAULT_BUCKET, region=config.aws_region, host=host, port=port,
                       visibility_timeout_s=(visibility_timeouts() if visibility_timeout_s is None
                                             else visibility_timeout_s),
                       dsn=dsn or database_url(config), export_env=True)
    stack.start()
    config_module.settings.cache_clear()
    from chalicelib import aws

    aws.reset()  # clients cached before were built for another endpoint (or none)
    return stack


def start_pump(state: StackState, *, workers: int = 1, schedule_speedup: float = 1.0, wait_s: int = 2) -> Pump:
    """The pump over ``app.py``'s handlers on ``state``'s queues, started."""
    import app as application

    return Pump(application.app, region=state.region, endpoint=state.endpoint, queue_urls=state.queues,
                workers=workers, wait_s=wait_s, schedule_speedup=schedule_speedup, functions=functions()).start()


def attach_to_running(data_dir: Path) -> StackState | None:
    """The running stack of ``data_dir`` (see :func:`engram_cli.local.stack.load_state`) with its environment exported
    to this process and the settings cache cleared; None when no stack runs there."""
    from chalicelib import config as config_module

    state = load_state(data_dir)
    if state is not None:
        apply_env(state, os.environ)
        config_module.settings.cache_clear()
    return state


@dataclass
class LocalServices:
    """What ``engram serve`` / ``demo`` run in one process: the moto ``stack``, the ``pump`` (or None) and the HTTP
    ``api`` (or None, until :meth:`serve_api`)."""

    stack: LocalStack
    pump: Pump | None
    api: Any = None

    @property
    def state(self) -> StackState:
        """The provisioned stack."""
        assert self.stack.state is not None
        return self.stack.state

    def serve_api(self, host: str, port: int) -> Any:
        """Start the HTTP API (:func:`engram_cli.server.start`, no background worker: the pump does that work) with
        the settings the stack exported; returns the running server."""
        from chalicelib import config as config_module
        from engram_cli import server

        self.api = server.start(config_module.settings(), host=host, port=port, worker_threads=0)
        self.stack.record_api(self.api.url)
        return self.api

    def stop(self) -> None:
        """Stop the pump (finishing batches in hand), the API, then moto."""
        if self.pump is not None:
            self.pump.stop()
        if self.api is not None:
            self.api.stop()
        self.stack.stop()
        from chalicelib import config as config_module

        config_module.settings.cache_clear()


def start_services(config: Settings, *, aws_port: int = DEFAULT_PORT, workers: int = 1,
                   pump: bool = True) -> LocalServices:
    """:func:`start_stack`, then the messages of the work the previous run left open (its queues died with it:
    :func:`engram_cli.local.resume.resend_open_work`), then (``pump``) :func:`start_pump` with ``workers``
    pollers per queue.

    Raises:
        OSError: ``aws_port`` is taken.
    """
    from chalicelib import config as config_module
    from chalicelib.dispatch.sqs import SqsDispatcher
    from engram_cli.local.resume import resend_open_work

    stack = start_stack(config, port=aws_port)
    state = stack.state
    assert state is not None  # start_stack started it
    try:
        resend_open_work(config_module.settings(), SqsDispatcher(config_module.settings()))
        running = start_pump(state, workers=workers) if pump else None
    except Exception:
        stack.stop()
        raise
    return LocalServices(stack=stack, pump=running)


def queue_depth(state: StackState, name: str) -> int:
    """Messages in queue ``name``, visible or in flight (SQS's approximate counts)."""
    attrs = state.client("sqs").get_queue_attributes(
        QueueUrl=state.queue_url(name),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


def store_files(config: Settings, tenant: str, store: str, names: set[str]) -> dict[str, Any]:
    """Filename → :class:`chalicelib.store.attachments.StoreFile` for the files of ``names`` attached to the
    tenant's store named (or with id) ``store``; {} while the store does not exist."""
    from chalicelib.store import attachments, vector_stores
    from chalicelib.store.db import connect

    with connect(config) as conn:
        found = vector_stores.find(conn, tenant, store)
        if found is None:
            return {}
        return {f.filename: f for f in attachments.list_all(conn, tenant, found.id) if f.filename in names}


def wait_for_files(config: Settings, state: StackState, tenant: str, store: str, names: set[str], *,
                   timeout_s: float, on_progress: Callable[[int], None] | None = None,
                   interval_s: float = 0.5) -> dict[str, Any]:
    """Poll until every file of ``names`` in the store is final (completed, failed or cancelled) and the stack's
    queues are drained, or ``timeout_s`` seconds pass; ``on_progress(final_count)`` after each poll. Returns the last
    :func:`store_files` (files not yet seen are missing from it). One connection and one count per poll, so the
    polling takes little from the work it waits for."""
    from chalicelib.store import attachments, vector_stores
    from chalicelib.store.db import connect

    deadline = time.monotonic() + timeout_s
    with connect(config) as conn:
        while True:
            found = vector_stores.find(conn, tenant, store)
            done = attachments.count_final(conn, tenant, found.id, sorted(names)) if found is not None else 0
            if on_progress is not None:
                on_progress(done)
            if done == len(names) and all(queue_depth(state, q) == 0 for q in state.roles.values()):
                break
            if time.monotonic() > deadline:
                break
            time.sleep(interval_s)
    return store_files(config, tenant, store, names)
