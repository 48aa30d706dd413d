"""One file through the pipeline: parse → chunk → embed (through the content-hash cache) → store.

The file's old chunks are replaced in one transaction with the new ones (or removed, with status ``failed`` and
``last_error``, when the file cannot be ingested), so a search never sees a half-written file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import psycopg

from chalicelib.embed.base import Embedder
from chalicelib.errors import DocumentError, EngramError
from chalicelib.ingest.chunk import Chunk, ChunkingStrategy, chunk_document, resolve_chunking_strategy
from chalicelib.ingest.parse import ParseLimits, parse_document
from chalicelib.store import chunks as chunk_rows
from chalicelib.store import embedding_cache
from chalicelib.store import files as file_rows
from chalicelib.store.vector_stores import VectorStore, check_embedding


@dataclass(slots=True)
class IngestResult:
    """What happened to one file. ``status``: ``completed``, ``failed`` or ``skipped`` (unchanged content);
    ``error``: ``{"code", "message"}`` when failed; ``embedded``/``cached``: chunk vectors computed now vs reused;
    ``seconds``: wall time per stage (``parse``, ``chunk``, ``embed``, ``store``)."""

    file_id: str
    filename: str
    status: str
    chunk_count: int = 0
    error: dict[str, str] | None = None
    embedded: int = 0
    cached: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def embed_with_cache(conn: psycopg.Connection, tenant_id: str, embedder: Embedder,
                     texts: Sequence[str]) -> tuple[list[Any], int]:
    """Vectors for ``texts`` (n × dim) reusing cached ones; returns ``(vectors, computed)`` where ``computed`` is
    how many texts were sent to the embedder. New vectors are added to the cache.

    Raises:
        UpstreamError / RateLimitError / InvalidRequestError: from the embedder.
    """
    hashes = [embedding_cache.text_hash(t) for t in texts]
    cached = embedding_cache.lookup(conn, tenant_id, embedder.model, hashes)
    missing: dict[bytes, str] = {}
    for digest, text in zip(hashes, texts):
        if digest not in cached and digest not in missing:
            missing[digest] = text
    if missing:
        vectors = embedder.embed(list(missing.values()))
        fresh = list(zip(missing.keys(), vectors))
        embedding_cache.store(conn, tenant_id, embedder.model, fresh)
        cached.update(fresh)
    return [cached[d] for d in hashes], len(missing)


def ingest_bytes(conn: psycopg.Connection, tenant_id: str, store: VectorStore, *, filename: str, data: bytes,
                 embedder: Embedder, attributes: dict[str, Any] | None = None, chunking_strategy: Any = None,
                 limits: ParseLimits = ParseLimits(), skip_unchanged: bool = True) -> IngestResult:
    """Ingest ``data`` as ``filename`` into ``store``: a file of that name already in the store is updated in
    place (same file id, old chunks replaced atomically); unchanged content is skipped when ``skip_unchanged``.

    Raises:
        EmbeddingMismatchError: the store uses another embedding model.
        InvalidRequestError: a bad ``chunking_strategy`` (nothing is written).
    """
    check_embedding(store, embedder.model, embedder.dimension)
    strategy = resolve_chunking_strategy(chunking_strategy, embedder_max_tokens=embedder.max_input_tokens)
    sha = file_rows.sha256_hex(data)
    existing = file_rows.find_store_file_by_name(conn, tenant_id, store.id, filename)
    if existing and skip_unchanged and existing.content_sha256 == sha and existing.status == "completed":
        return IngestResult(existing.file_id, filename, "skipped", chunk_count=existing.chunk_count)
    with conn.transaction():
        if existing:
            file_id = file_rows.replace_content(conn, tenant_id, existing.file_id, data).id
        else:
            file_id = file_rows.create_file(conn, tenant_id, filename=filename, data=data).id
        file_rows.attach(conn, tenant_id, store.id, file_id, attributes=attributes or {},
                         chunking_strategy=strategy.to_openai())
    return process_file(conn, tenant_id, store, file_id, filename=filename, data=data, embedder=embedder,
                        strategy=strategy, attributes=attributes or {}, limits=limits)


class _Superseded(Exception):
    """The file stopped being ours mid-way (cancelled, detached, or re-attempted by another worker): roll back."""


def process_file(conn: psycopg.Connection, tenant_id: str, store: VectorStore, file_id: str, *, filename: str,
                 data: bytes, embedder: Embedder, strategy: ChunkingStrategy, attributes: dict[str, Any],
                 limits: ParseLimits = ParseLimits(), attempt: int | None = None) -> IngestResult:
    """Parse, chunk, embed and store an attached file, ending it ``completed`` or ``failed`` (never left
    ``in_progress`` by an exception we can catch). Document and upstream errors become ``last_error``; anything
    else is recorded as ``server_error`` and re-raised.

    With ``attempt`` (the processing lease this call holds, :mod:`chalicelib.store.processing`), the final write
    only happens if the file is still ``in_progress`` under that attempt; otherwise nothing is written and the
    result's status is ``superseded``."""
    result = IngestResult(file_id, filename, "failed")
    try:
        chunks, vectors = _prepare(conn, tenant_id, data, filename, embedder, strategy, limits, result)
    except DocumentError as exc:
        _fail(conn, tenant_id, store, file_id, result, exc.code or "invalid_file", exc.message, attempt)
        return result
    except EngramError as exc:
        _fail(conn, tenant_id, store, file_id, result, "server_error", exc.message, attempt)
        return result
    except Exception:
        _fail(conn, tenant_id, store, file_id, result, "server_error", "Internal error while processing the file.",
              attempt)
        raise
    started = time.perf_counter()
    try:
        with conn.transaction():
            chunk_rows.lock_store(conn, tenant_id, store.id)
            if not file_rows.mark_completed(conn, tenant_id, store.id, file_id, chunk_count=len(chunks),
                                            usage_bytes=chunk_rows.usage_bytes(chunks, embedder.dimension),
                                            content_sha256=file_rows.sha256_hex(data), attempt=attempt):
                raise _Superseded
            # Read the attributes again now that the row is locked: an update made while the file was being
            # processed must reach its chunks (filters read the chunks' copy).
            attributes = file_rows.get_store_file(conn, tenant_id, store.id, file_id).attributes
            chunk_rows.delete_file_chunks(conn, tenant_id, store.id, file_id)
            chunk_rows.insert_file_chunks(conn, tenant_id, store.id, file_id, chunks, vectors,
                                          dim=embedder.dimension, attributes=attributes)
            chunk_rows.refresh_store_usage(conn, tenant_id, store.id)
    except _Superseded:
        result.status = "superseded"
        return result
    result.seconds["store"] = time.perf_counter() - started
    result.status, result.chunk_count = "completed", len(chunks)
    return result


def _prepare(conn: psycopg.Connection, tenant_id: str, data: bytes, filename: str, embedder: Embedder,
             strategy: ChunkingStrategy, limits: ParseLimits, result: IngestResult) -> tuple[list[Chunk], list[Any]]:
    started = time.perf_counter()
    document = parse_document(data, filename, limits=limits)
    parsed = time.perf_counter()
    chunks = chunk_document(document, strategy, embedder.tokenizer)
    chunked = time.perf_counter()
    vectors, computed = embed_with_cache(conn, tenant_id, embedder, [c.text for c in chunks])
    embedded = time.perf_counter()
    result.seconds.update(parse=parsed - started, chunk=chunked - parsed, embed=embedded - chunked)
    result.embedded, result.cached = computed, len(chunks) - computed
    return chunks, vectors


def _fail(conn: psycopg.Connection, tenant_id: str, store: VectorStore, file_id: str, result: IngestResult,
          code: str, message: str, attempt: int | None = None) -> None:
    try:
        with conn.transaction():
            chunk_rows.lock_store(conn, tenant_id, store.id)
            if not file_rows.mark_failed(conn, tenant_id, store.id, file_id, code=code, message=message,
                                         attempt=attempt):
                raise _Superseded
            chunk_rows.delete_file_chunks(conn, tenant_id, store.id, file_id)
            chunk_rows.refresh_store_usage(conn, tenant_id, store.id)
    except _Superseded:
        result.status = "superseded"
        return
    result.status, result.error = "failed", {"code": code, "message": message}
