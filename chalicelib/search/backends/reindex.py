"""Moving a vector store between backends without re-embedding (``engram stores reindex``): the vectors come from
the store's rows (a backend in Postgres) or the tenant's embedding cache (a store on a backend that keeps its own
copy keeps no vector in its rows; a vector the cache lost is embedded again with the store's model), the keyword
index from the rows' tsvectors. Any registered backend to any other, through the port alone.

The store keeps answering searches from its current backend while its files are copied to the new one, file by
file, each recorded as done, so an interrupted move resumes where it stopped (running the command again). The
switch is one transaction holding the store's lock (ingestion into the store waits for it): the files whose
chunks changed after the move began are copied again, what the old backend needed is dropped (vectors and
postings in Postgres; the old backend's points, queued for removal), and the store's ``backend`` flips.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from chalicelib import deps
from chalicelib.config import VECTOR_BACKENDS, Settings
from chalicelib.errors import ConfigurationError, InvalidRequestError
from chalicelib.search.backends import VectorBackend, for_backend, sync
from chalicelib.store import chunks, reindex, vector_stores
from chalicelib.store import vector_index_outbox as outbox
from chalicelib.store.vector_stores import VectorStore

__all__ = ["Moved", "move"]

# progress(files done, files in all) after each file.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class Moved:
    """What a move did: the store's ``backend`` now, ``files`` copied (this run), ``changed`` files copied again
    at the switch, ``embedded`` vectors the cache lacked, and whether it ``resumed`` an unfinished move."""

    backend: str
    files: int
    changed: int
    embedded: int
    resumed: bool


def move(conn: psycopg.Connection, settings: Settings, store: VectorStore, target: str, *,
         progress: Progress | None = None) -> Moved:
    """Move ``store`` (the caller's own) to backend ``target`` on ``conn`` (autocommit; one transaction per file,
    one for the switch). Moving a store to the backend it is on does nothing.

    Raises:
        InvalidRequestError: ``target`` is not a backend.
        ConfigurationError: vectors are missing from the cache and the configured embedder is not the store's.
        UpstreamError: a backend failed (run it again to resume).
    """
    if target not in VECTOR_BACKENDS:
        raise InvalidRequestError(f"Unknown vector backend {target!r}: choose {' or '.join(VECTOR_BACKENDS)}.",
                                  param="backend", code="invalid_value")
    if store.backend == target:
        return Moved(target, 0, 0, 0, False)
    source = for_backend(store.backend, settings, store.embedding_dim)
    destination = for_backend(target, settings, store.embedding_dim)
    state = reindex.start(conn, store.tenant_id, store.id, target)
    resumed = state.cursor_file_id is not None
    pending = reindex.files_after(conn, store.tenant_id, store.id, state.cursor_file_id)
    total = state.files_done + len(pending)
    embedded = 0
    for done, file_id in enumerate(pending, start=state.files_done + 1):
        with conn.transaction():
            embedded += _copy(conn, settings, store, destination, file_id)
            reindex.advance(conn, store.id, file_id)
        if progress is not None:
            progress(done, total)
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
    return Moved(target, len(pending), len(changed), embedded, resumed)


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
