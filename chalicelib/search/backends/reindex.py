"""Moving a vector store between backends without re-embedding (``engram stores reindex``): the vectors come from
the store's rows (a backend in Postgres) or the tenant's embedding cache (a store on a backend that keeps its own
copy keeps no vector in its rows; a vector the cache lost is embedded again with the store's model), the keyword
index from the rows' tsvectors. Any registered backend to any other, through the port alone.

The store keeps answering searches from its current backend while its files are copied to the new one, file by
file, each recorded as done, so an interrupted move resumes where it stopped (running the command again). The
switch is one transaction holding the store's lock (ingestion into the store waits for it): the files whose
chunks changed after the move began are copied again, what the old backend needed is dropped (vectors and
postings in Postgres; the old backend's points, queued for removal), and the store's ``backend`` flips; then the
new backend builds its indexes (``settle``), so the moved store is searched through them at once.

**Where a move runs** (issue 33 §3): in the process that can hold the backends' engines. A Qdrant server can be
reached from anywhere, but the embedded engine is opened by one process at a time, and while ``engram serve``
runs, that is the stack. So ``engram stores reindex`` runs the move itself when no local stack runs on its data
folder, and otherwise asks the stack (:func:`request`: a ``vector_store.move`` message on its ingest queue,
handled by :func:`handle_move` in the stack's process, which goes on in bounded steps, :data:`STEP_S` seconds
each, re-sending itself until the move is done) and watches the move's row (:func:`chalicelib.store.reindex.
progress`). Either way one mover at a time (a session advisory lock per store: a second one waits its turn or
leaves), the same resumable steps, and the same row to watch.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import psycopg

from chalicelib import deps
from chalicelib.config import VECTOR_BACKENDS, Settings
from chalicelib.dispatch.port import Delivery, Message
from chalicelib.errors import (
    ConfigurationError,
    ConflictError,
    EngramError,
    InvalidRequestError,
    NotFoundError,
    UpstreamError,
)
from chalicelib.search.backends import VectorBackend, for_backend, sync
from chalicelib.store import chunks, reindex, vector_stores
from chalicelib.store import vector_index_outbox as outbox
from chalicelib.store.vector_stores import VectorStore

__all__ = ["STEP_S", "MoveBusy", "MoveMessage", "Moved", "give_up_move", "handle_move", "move", "request"]

logger = logging.getLogger("engram.search.reindex")

# progress(files done, files in all) after each file.
Progress = Callable[[int, int], None]
# One step of a move run by the stack's queue handler (seconds): the ingest function's timeout (300 s) less a margin
# for the file in hand and the switch; then the handler re-sends its message and the next delivery resumes.
STEP_S = 200.0
# Namespace of the per-store move lock (a session advisory lock: held for as long as a mover works on the store).
_LOCK_SALT = b"engram-vector-store-move:"
_TRY_LOCK = "SELECT pg_try_advisory_lock(%(key)s)"
_UNLOCK = "SELECT pg_advisory_unlock(%(key)s)"


class MoveBusy(ConflictError):
    """Another process is moving this store now."""

    default_code = "move_in_progress"


@dataclass(frozen=True, slots=True)
class Moved:
    """What a move did: the store's ``backend`` now, ``files`` copied (this run), ``changed`` files copied again
    at the switch, ``embedded`` vectors the cache lacked, whether it ``resumed`` an unfinished move, and whether it
    is ``finished`` (False: it stopped at its time limit and resumes when run again)."""

    backend: str
    files: int
    changed: int
    embedded: int
    resumed: bool
    finished: bool = True


def _check_target(target: str) -> None:
    if target not in VECTOR_BACKENDS:
        raise InvalidRequestError(f"Unknown vector backend {target!r}: choose {' or '.join(VECTOR_BACKENDS)}.",
                                  param="backend", code="invalid_value")


def _lock_key(store_id: str) -> int:
    return zlib.crc32(_LOCK_SALT + store_id.encode()) - 2**31


def move(conn: psycopg.Connection, settings: Settings, store: VectorStore, target: str, *,
         progress: Progress | None = None, step_s: float | None = None) -> Moved:
    """Move ``store`` (the caller's own) to backend ``target`` on ``conn`` (autocommit; one transaction per file,
    one for the switch), holding the store's move lock; then build the new backend's indexes. Moving a store to
    the backend it is on does nothing. ``step_s``: stop after about this many seconds (between files), unfinished
    (the next call resumes); None: go to the end.

    Raises:
        InvalidRequestError: ``target`` is not a backend.
        MoveBusy: another process is moving the store.
        ConfigurationError: vectors are missing from the cache and the configured embedder is not the store's.
        UpstreamError: a backend failed (run it again to resume).
    """
    _check_target(target)
    if store.backend == target:
        return Moved(target, 0, 0, 0, False)
    key = _lock_key(store.id)
    if not conn.execute(_TRY_LOCK, {"key": key}).fetchone()[0]:  # type: ignore[index]
        raise MoveBusy(f"Vector store {store.id} is being moved by another process (`engram serve`'s stack, or "
                       "another `engram stores reindex`).")
    try:
        return _move(conn, settings, store, target, progress, step_s)
    finally:
        conn.execute(_UNLOCK, {"key": key})


def _move(conn: psycopg.Connection, settings: Settings, store: VectorStore, target: str,
          progress: Progress | None, step_s: float | None) -> Moved:
    stop_at = None if step_s is None else time.monotonic() + step_s
    source = for_backend(store.backend, settings, store.embedding_dim)
    destination = for_backend(target, settings, store.embedding_dim)
    state = reindex.start(conn, store.tenant_id, store.id, target)
    resumed = state.cursor_file_id is not None
    pending = reindex.files_after(conn, store.tenant_id, store.id, state.cursor_file_id)
    total = state.files_done + len(pending)
    reindex.set_total(conn, store.id, total)
    embedded = 0
    for done, file_id in enumerate(pending, start=state.files_done + 1):
        with conn.transaction():
            embedded += _copy(conn, settings, store, destination, file_id)
            reindex.advance(conn, store.id, file_id)
        if progress is not None:
            progress(done, total)
        if stop_at is not None and time.monotonic() >= stop_at and done < total:
            return Moved(store.backend, done - state.files_done, 0, embedded, resumed, finished=False)
    with conn.transaction():
        chunks.lock_store(conn, store.tenant_id, store.id)
        changed = reindex.changed_files(conn, store.tenant_id, store.id, state.started_max_chunk_id)
        for file_id in changed:
            embedded += _copy(conn, settings, store, destination, file_id)
        if not destination.in_postgres:
            destination.keep_files(store.tenant_id, store.id, store.embedding_dim,
                                   reindex.files_after(conn, store.tenant_id, store.id, None))  # detached meanwhile
            if source.in_postgres:
                reindex.drop_postgres_index(conn, store.tenant_id, store.id)
            else:
                reindex.queue_store_removal(conn, store.tenant_id, store.id, store.backend)
            reindex.set_backend(conn, store.tenant_id, store.id, target)
        else:
            embedded += _fill(conn, settings, store, None)  # rows written meanwhile without a vector
            vector_stores.ensure_hnsw_index(conn, store.embedding_dim)
            reindex.set_backend(conn, store.tenant_id, store.id, target)
            reindex.rebuild_postings(conn, store.id)
            reindex.queue_store_removal(conn, store.tenant_id, store.id, store.backend)
        reindex.finish(conn, store.id)
    if not source.in_postgres:
        sync.sync_pending(conn, settings, store_id=store.id, wait=True)
    destination.settle([store.embedding_dim])  # searched through the new backend's indexes from now on
    return Moved(target, len(pending), len(changed), embedded, resumed)


@dataclass(frozen=True, slots=True)
class MoveMessage(Message):
    """Move vector store ``store_id`` of ``tenant`` to backend ``target`` (one step; the handler re-sends it until
    the move is done). Body ``{"type": "vector_store.move", "v": 1, "tenant", "store_id", "target"}``."""

    kind: ClassVar[str] = "vector_store.move"
    store_id: str
    target: str


def request(conn: psycopg.Connection, settings: Settings, store: VectorStore, target: str) -> None:
    """Ask the process the configured dispatcher reaches (the running stack) to move ``store`` to ``target``:
    record the move (so watchers see it at once) and send a :class:`MoveMessage`. Moving a store to the backend it
    is on asks nothing.

    Raises:
        InvalidRequestError: ``target`` is not a backend.
        UpstreamError: the queue refused the message.
    """
    _check_target(target)
    if store.backend == target:
        return
    reindex.start(conn, store.tenant_id, store.id, target)
    deps.dispatcher(settings).send([MoveMessage(store.tenant_id, store.id, target)])


def handle_move(message: MoveMessage, delivery: Delivery) -> str:
    """The ``vector_store.move`` handler: one step of the move (:data:`STEP_S` seconds), then the message again
    while it is unfinished. Returns ``moved``, ``step`` (more to do: re-sent), ``busy`` (another process moves the
    store: it finishes it), ``gone`` (no such store, or the move was finished or replaced) or ``failed`` (a
    failure that another try would meet again, recorded on the move for its watcher).

    Raises:
        UpstreamError: a backend or the queue failed (recorded on the move; the message is retried).
    """
    with deps.connect(delivery.settings) as conn:
        try:
            store = vector_stores.get(conn, message.tenant, message.store_id)
        except NotFoundError:
            return "gone"
        state = reindex.progress(conn, message.tenant, message.store_id)
        if state is None or state.target != message.target:
            return "gone"
        try:
            moved = move(conn, delivery.settings, store, message.target, step_s=STEP_S)
        except MoveBusy:
            return "busy"
        except UpstreamError as error:
            reindex.failed(conn, store.id, f"{type(error).__name__}: {error}")
            raise
        except EngramError as error:
            logger.warning("moving %s to %s failed: %s", store.id, message.target, error)
            reindex.failed(conn, store.id, f"{type(error).__name__}: {error}")
            return "failed"
    if not moved.finished:
        delivery.dispatcher.send([message])
        return "step"
    return "moved"


def give_up_move(message: MoveMessage, delivery: Delivery, error: BaseException) -> None:
    """The last allowed delivery failed: the move keeps its row (with the error, for its watcher) and resumes when
    asked again."""
    logger.warning("moving %s to %s gave up: %s", message.store_id, message.target, error)


def _copy(conn: psycopg.Connection, settings: Settings, store: VectorStore, destination: VectorBackend,
          file_id: str) -> int:
    """Copy one file to ``destination``; returns how many vectors had to be embedded."""
    if destination.in_postgres:
        return _fill(conn, settings, store, file_id)
    row = outbox.StoreRow(store.backend, store.embedding_model, store.embedding_dim, store.chunk_count,
                          store.keyword_length)
    destination.write_file(conn, store.tenant_id, store.id, row, file_id)
    return 0


def _fill(conn: psycopg.Connection, settings: Settings, store: VectorStore, file_id: str | None) -> int:
    """Give the rows (one file's, or the store's) their vectors from the cache, embedding what it lacks."""
    reindex.fill_vectors(conn, store.tenant_id, store.id, store.embedding_model, file_id)
    missing = reindex.missing_vectors(conn, store.tenant_id, store.id, file_id)
    if not missing:
        return 0
    embedder = deps.embedder(settings)
    if embedder.model != store.embedding_model:
        raise ConfigurationError(f"{len(missing)} vectors of model {store.embedding_model!r} are not in the "
                                 f"embedding cache, and the configured embedder is {embedder.model!r}.")
    for (chunk_id, _), vector in zip(missing, embedder.embed([text for _, text in missing]), strict=True):
        reindex.set_vector(conn, store.tenant_id, chunk_id, chunks.dumpable(vector))
    return len(missing)
