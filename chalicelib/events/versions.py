"""One file version through the pipeline: :func:`stage` (read the bytes, parse, chunk, stage the chunk texts, fan
out embedding batches), :func:`land` (embed one batch and count it; the last one swaps the file's chunks in),
:func:`give_up` (the last receive of a message failed: the file is ``failed`` with ``last_error``).

Every step is idempotent, keyed on ``(store, file, version)`` and the batch number: a step repeated by a
duplicated or redelivered message finds its work done (job status, landed-batch marker) and changes nothing.
A message of a version that was failed re-opens it (``engram redrive`` after an outage completes the file); a
message of a version that is no longer the attachment's (re-attached, cancelled, detached, overwritten) only marks
its job ``superseded``.

Run on a tenant connection (:func:`chalicelib.store.db.tenant_connection`): row-level security confines every
statement to the message's tenant.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Iterable

import psycopg

from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.errors import DocumentError, EmbeddingMismatchError, EngramError, RateLimitError
from chalicelib.events import dispatch, objects
from chalicelib.events.messages import BatchMessage, FileMessage
from chalicelib.ingest.chunk import chunk_document, resolve_chunking_strategy
from chalicelib.ingest.parse import ParseLimits, parse_document
from chalicelib.ingest.pipeline import embed_with_cache
from chalicelib.store import chunks as chunk_rows
from chalicelib.store import files as file_rows
from chalicelib.store import ingest_jobs, staged_chunks, vector_stores
from chalicelib.store.ingest_jobs import Job

logger = logging.getLogger("engram.events")


def stage(conn: psycopg.Connection, settings: Settings, embedder: Embedder, message: FileMessage, *,
          arrived_at: datetime | None = None) -> str:
    """Parse, chunk and stage the version ``message`` names, then queue its embedding batches (a version already
    staged re-sends the batches that have not landed). Returns what happened: ``staged``, ``resent``,
    ``completed`` (no chunks), ``rejected`` (the document cannot be ingested: the file is ``failed``),
    ``superseded``, ``missing`` or the job's final status.

    ``arrived_at`` is when the message was first received (:func:`chalicelib.events.batch.first_received_at`): see
    :class:`VersionFailedError`.

    Raises:
        UpstreamError: S3 or SQS failed (the message is retried).
        VersionFailedError: the version failed after this message was sent (left for the dead-letter queue).
    """
    job = _open(conn, settings, message.tenant, message.vector_store_id, message.file_id, message.version, arrived_at)
    if isinstance(job, str):
        return job
    if job.status == "embedding":
        _send(settings, job, ingest_jobs.outstanding_batches(conn, job))
        return "resent"
    data = _read(conn, settings, job)
    if data is None:
        return _supersede(conn, job)
    attached = file_rows.get_store_file(conn, job.tenant_id, job.vector_store_id, job.file_id)
    if len(data) > settings.max_file_bytes:
        return _end(conn, job, "rejected", "invalid_file",
                    f"File is {len(data):,} bytes; the limit is {settings.max_file_bytes:,} bytes.")
    strategy = resolve_chunking_strategy(attached.chunking_strategy, embedder_max_tokens=embedder.max_input_tokens)
    try:
        document = parse_document(data, attached.filename, limits=ParseLimits())
        chunks = chunk_document(document, strategy, embedder.tokenizer)
    except DocumentError as exc:
        return _end(conn, job, "rejected", exc.code or "invalid_file", exc.message)
    batches = staged_chunks.batch_count(len(chunks), settings.embed_batch_chunks)
    with conn.transaction():
        locked = ingest_jobs.lock(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
        if locked is None or locked.status != "pending":
            return locked.status if locked else "missing"
        staged_chunks.stage(conn, locked, chunks, batch_chunks=settings.embed_batch_chunks)
        ingest_jobs.set_staged(conn, locked, chunk_count=len(chunks), batch_count=batches,
                               content_sha256=file_rows.sha256_hex(data))
        if locked.source_key:
            file_rows.set_digest(conn, job.tenant_id, job.file_id, data)
        ingest_jobs.heartbeat(conn, locked, lease_s=settings.processing_lease_s)
        if batches == 0:
            staged = ingest_jobs.lock(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
            return _finalize(conn, staged, embedder)
    _send(settings, job, range(batches))
    return "staged"


def land(conn: psycopg.Connection, settings: Settings, embedder: Embedder, message: BatchMessage, *,
         arrived_at: datetime | None = None) -> str:
    """Embed batch ``message.batch`` (through the tenant's embedding cache), store its vectors and count it; the
    batch that completes the count also swaps the version's chunks in for the file's old ones, in the same
    transaction. Returns ``landed``, ``completed``, ``duplicate``, ``superseded``, ``rejected``, ``missing`` or
    the job's final status.

    Raises:
        UpstreamError / RateLimitError: the embedding service failed after its retries (the message is retried).
        VersionFailedError: the version failed after this message was sent (left for the dead-letter queue).
    """
    job = _open(conn, settings, message.tenant, message.vector_store_id, message.file_id, message.version, arrived_at)
    if isinstance(job, str):
        return job
    if job.status != "embedding" or ingest_jobs.batch_landed(conn, job, message.batch):
        return "duplicate" if job.status == "embedding" else job.status
    store = vector_stores.get(conn, job.tenant_id, job.vector_store_id)
    try:
        vector_stores.check_embedding(store, embedder.model, embedder.dimension)
    except EmbeddingMismatchError as exc:
        return _end(conn, job, "rejected", exc.code, exc.message)
    rows = staged_chunks.batch_texts(conn, job, message.batch)
    vectors, _ = embed_with_cache(conn, job.tenant_id, embedder, [text for _, text in rows])
    with conn.transaction():
        locked = ingest_jobs.lock(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
        if locked is None or locked.status != "embedding":
            return locked.status if locked else "missing"
        counted = ingest_jobs.land_batch(conn, locked, message.batch)
        if counted is None:
            return "duplicate"
        staged_chunks.set_vectors(conn, locked, [(index, v) for (index, _), v in zip(rows, vectors)])
        done, total = counted
        if done < total:
            ingest_jobs.heartbeat(conn, locked, lease_s=settings.processing_lease_s)
            return "landed"
        return _finalize(conn, locked, embedder)


def give_up(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, version: int,
            error: BaseException) -> bool:
    """The last allowed receive of a message of this version failed with ``error``: fail the file with
    ``last_error`` (its chunks removed, like every failed file) and the job ``failed`` — staged chunks are kept,
    so a redriven message can re-open and finish it. Returns whether the file was failed now."""
    job = ingest_jobs.get(conn, tenant_id, store_id, file_id, version)
    if job is None or job.status not in ingest_jobs.OPEN:
        return False
    code, message = error_of(error)
    return _end(conn, job, "failed", code, message) == "failed"


def error_of(error: BaseException) -> tuple[str, str]:
    """``(last_error.code, message)`` for an exception: OpenAI's ``rate_limit_exceeded`` for a 429 that outlasted
    the retries, ``server_error`` otherwise (with our message, or a generic one for foreign exceptions)."""
    if isinstance(error, RateLimitError):
        return "rate_limit_exceeded", error.message
    if isinstance(error, EngramError):
        return "server_error", error.message
    return "server_error", "Internal error while processing the file."


class VersionFailedError(EngramError):
    """The message's version was failed after the message first arrived: it is a retry from the outage that failed
    the file, not a redrive. Re-opening on it would flip the file back to ``in_progress`` while the outage lasts, so the
    record is reported failed instead and reaches the dead-letter queue with its siblings; ``engram redrive`` sends
    them again as new messages (first received after the failure), and those re-open the version."""


def _open(conn: psycopg.Connection, settings: Settings, tenant_id: str, store_id: str, file_id: str,
          version: int, arrived_at: datetime | None) -> Job | str:
    """The version's job if there is work to do on it (re-opening a failed one), else what to answer."""
    job = ingest_jobs.get(conn, tenant_id, store_id, file_id, version)
    if job is None:
        return "missing"
    if job.status in ingest_jobs.FINAL:
        return job.status
    state, since = ingest_jobs.attachment_state(conn, job)
    if state == "gone":
        return _supersede(conn, job)
    if state == "failed" or job.status == "failed":
        failed_at = since if state == "failed" else job.updated_at
        if arrived_at is not None and failed_at is not None and arrived_at <= failed_at:
            raise VersionFailedError(f"{file_id} v{version} failed at {failed_at.isoformat()}, after this message "
                                     "arrived; redrive the dead-letter queue to retry it.")
        if not ingest_jobs.reopen(conn, job, lease_s=settings.processing_lease_s):
            return _supersede(conn, job)
        logger.info("re-opened %s v%d of %s", file_id, version, store_id)
        job = ingest_jobs.get(conn, tenant_id, store_id, file_id, version)
    return job


def _read(conn: psycopg.Connection, settings: Settings, job: Job) -> bytes | None:
    if job.source_key:
        return objects.read(settings, job.source_bucket, job.source_key, job.source_etag)
    return file_rows.get_content(conn, job.tenant_id, job.file_id)


def _send(settings: Settings, job: Job, batches: Iterable[int]) -> None:
    dispatch.send_batches(settings, [BatchMessage(job.tenant_id, job.vector_store_id, job.file_id, job.version, b)
                                     for b in batches])


def _finalize(conn: psycopg.Connection, job: Job, embedder: Embedder) -> str:
    """Swap the version's staged chunks in (inside the caller's transaction, which holds the job's lock)."""
    tenant, store, file_id = job.tenant_id, job.vector_store_id, job.file_id
    chunk_rows.lock_store(conn, tenant, store)
    chunks, vectors = staged_chunks.load(conn, job)
    dim = embedder.dimension
    if not file_rows.mark_completed(conn, tenant, store, file_id, chunk_count=len(chunks),
                                    usage_bytes=chunk_rows.usage_bytes(chunks, dim),
                                    content_sha256=job.content_sha256 or "", attempt=job.version):
        _retire(conn, job, "superseded")
        return "superseded"
    # Read the attributes now that the row is locked: an update made while the file was processed must reach its
    # chunks (filters read the chunks' copy).
    attributes = file_rows.get_store_file(conn, tenant, store, file_id).attributes
    chunk_rows.delete_file_chunks(conn, tenant, store, file_id)
    chunk_rows.insert_file_chunks(conn, tenant, store, file_id, chunks, vectors, dim=dim, attributes=attributes)
    chunk_rows.refresh_store_usage(conn, tenant, store)
    _retire(conn, job, "completed")
    return "completed"


def _retire(conn: psycopg.Connection, job: Job, status: str, error: dict[str, str] | None = None) -> None:
    ingest_jobs.set_status(conn, job, status, error)
    staged_chunks.discard(conn, job)
    ingest_jobs.clear_batches(conn, job)


def _supersede(conn: psycopg.Connection, job: Job) -> str:
    with conn.transaction():
        locked = ingest_jobs.lock(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
        if locked is not None and locked.status not in ingest_jobs.FINAL:
            _retire(conn, locked, "superseded")
    return "superseded"


def _end(conn: psycopg.Connection, job: Job, status: str, code: str, message: str) -> str:
    """End an open version ``failed`` (staged chunks kept for a redrive) or ``rejected``, failing its file."""
    error = {"code": code, "message": message}
    with conn.transaction():
        locked = ingest_jobs.lock(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
        if locked is None or locked.status not in ingest_jobs.OPEN:
            return locked.status if locked else "missing"
        if status == "failed":
            ingest_jobs.set_status(conn, locked, status, error)
        else:
            _retire(conn, locked, status, error)
        chunk_rows.lock_store(conn, job.tenant_id, job.vector_store_id)
        if file_rows.mark_failed(conn, job.tenant_id, job.vector_store_id, job.file_id, code=code, message=message,
                                 attempt=job.version):
            chunk_rows.delete_file_chunks(conn, job.tenant_id, job.vector_store_id, job.file_id)
            chunk_rows.refresh_store_usage(conn, job.tenant_id, job.vector_store_id)
    logger.info("%s %s v%d: %s (%s)", status, job.file_id, job.version, code, message)
    return status
