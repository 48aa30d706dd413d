"""Ingesting a local file by name (``engram ingest``, the benchmarks): the file of that name in the store is
updated in place (same file id) or created, attached, and run inline through the ingestion engine
(:mod:`chalicelib.ingest.engine`), which replaces its chunks atomically — a search never sees it half-written.
Unchanged content is skipped.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from chalicelib.config import Settings
from chalicelib.dispatch.local import LocalDispatcher
from chalicelib.dispatch.port import Delivery
from chalicelib.embed.base import Embedder
from chalicelib.errors import EngramError
from chalicelib.ingest import engine
from chalicelib.ingest.chunk import resolve_chunking_strategy
from chalicelib.ingest.engine import Outcome
from chalicelib.store import attachments
from chalicelib.store import files as file_rows
from chalicelib.store.vector_stores import VectorStore, check_embedding

__all__ = ["IngestResult", "ingest_bytes"]

# What one ingested file reports (the engine's Outcome).
IngestResult = Outcome


def ingest_bytes(conn: psycopg.Connection, settings: Settings, tenant_id: str, store: VectorStore, *, filename: str,
                 data: bytes, embedder: Embedder, attributes: dict[str, Any] | None = None,
                 chunking_strategy: Any = None, skip_unchanged: bool = True) -> IngestResult:
    """Ingest ``data`` (bytes) as ``filename`` into ``store``, inline; returns the file's final status (``completed``,
    ``failed`` with ``error``, or ``skipped`` when its content is unchanged and ``skip_unchanged``).

    Raises:
        EmbeddingMismatchError: the store uses another embedding model.
        InvalidRequestError: a bad ``chunking_strategy`` (nothing is written).
    """
    check_embedding(store, embedder.model, embedder.dimension)
    strategy = resolve_chunking_strategy(chunking_strategy, embedder_max_tokens=embedder.max_input_tokens)
    sha = file_rows.sha256_hex(data)
    existing = attachments.find_by_name(conn, tenant_id, store.id, filename)
    if existing and skip_unchanged and existing.content_sha256 == sha and existing.status == "completed":
        return IngestResult(existing.file_id, filename, "skipped", chunk_count=existing.chunk_count)
    started = time.perf_counter()
    with conn.transaction():
        if existing:
            file_id = file_rows.replace_content(conn, tenant_id, existing.file_id, data).id
        else:
            file_id = file_rows.create_file(conn, tenant_id, filename=filename, data=data).id
        attachments.attach(conn, tenant_id, store.id, file_id, attributes=attributes or {},
                           chunking_strategy=strategy.to_openai())
        messages = engine.start(conn, settings, tenant_id, store.id, [file_id])
    result = IngestResult(file_id, filename, "in_progress")
    delivery = Delivery(settings=settings, dispatcher=LocalDispatcher(settings, threads=0), inline=True)
    for message in messages:
        try:
            engine.stage(conn, delivery, embedder, message, report=result)
        except Exception as exc:  # recorded on the file (last_error); a bug still surfaces
            engine.fail_version(conn, tenant_id, store.id, file_id, message.version, exc)
            if not isinstance(exc, EngramError):
                raise
    row = attachments.get(conn, tenant_id, store.id, file_id)
    result.status, result.error = row.status, row.last_error.copy() if row.last_error else None
    result.chunk_count = row.chunk_count
    result.seconds["total"] = time.perf_counter() - started
    return result
