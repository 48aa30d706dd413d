"""The one engine that takes an attached file to ``completed`` (or ``failed``), however it runs: inline inside an
attach request or ``engram ingest``, in a background thread of ``engram serve``, or through SQS when deployed (and
on the local moto stack). One state machine, one lease, one job row per run:

    attach (in_progress) ─ start ─► version v: pending ─ stage ─► embedding ─ land × batches ─► completed
                                                 │ (inline: parse, chunk, embed, swap in one go) ──────────► completed
                                                 └──► rejected (the document cannot be read) / failed / superseded

- :func:`start` claims the attachment's lease; the claim's attempt number is the **version** (an
  ``ingest_jobs`` row, :mod:`chalicelib.store.ingest_jobs`) and guards its final write.
- :func:`stage` (message ``ingest.file``) reads the bytes, parses and chunks them. Delivered inline it embeds every
  chunk at once and swaps them in; otherwise it stages the chunk texts in Postgres and sends one ``embed.batch``
  message per batch through the delivery's dispatcher.
- :func:`land` (message ``embed.batch``) embeds one batch; the batch that completes the count swaps the staged
  chunks in, in the same transaction.
- Every swap, failure and rejection goes through :mod:`chalicelib.store.attachments`' transition.
- :func:`give_up` — the last allowed delivery failed: the file is ``failed`` with ``last_error``; staged chunks are
  kept so a redriven message re-opens the version and finishes it.

Every step is idempotent, keyed on ``(store, file, version)`` and the batch number: a step repeated by a duplicated
or redelivered message finds its work done (job status, landed-batch marker) and changes nothing. A message of a
version that is no longer the attachment's (re-attached, cancelled, detached, overwritten) only marks its job
``superseded``. Handlers run on a tenant connection (:func:`chalicelib.store.db.tenant_connection`): row-level
security confines every statement to the message's tenant.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import psycopg

from chalicelib.config import Settings
from chalicelib.dispatch.port import Delivery, Dispatcher
from chalicelib.embed import rate as embed_rate
from chalicelib.embed.base import Embedder
from chalicelib.errors import DocumentError, EmbeddingMismatchError, EngramError, FileContentError, RateLimitError
from chalicelib.ingest.chunk import chunk_document, resolve_chunking_strategy
from chalicelib.ingest.messages import BatchMessage, FileMessage
from chalicelib.ingest.parse import ParseLimits, parse_document
from chalicelib.store import attachments, blobs, embedding_cache, ingest_jobs, staged_chunks, vector_stores
from chalicelib.store import files as file_rows
from chalicelib.store.chunks import Chunk
from chalicelib.store.db import pipeline
from chalicelib.store.ingest_jobs import Job, VersionStatus
from chalicelib.wire import FileStatus, LastError

__all__ = [
    "Outcome",
    "VersionFailedError",
    "embed_with_cache",
    "error_of",
    "give_up",
    "handle_batch",
    "handle_file",
    "land",
    "retry_stalled",
    "send",
    "stage",
    "start",
]

logger = logging.getLogger("engram.ingest")

# A version that is open with its messages in a durable queue (SQS) is only re-sent by housekeeping after this long
# without progress: SQS redelivers and dead-letters its messages itself, and a backlog must not restart files whose
# batches are merely queued. Six hours exceeds a Lambda visibility timeout (at most 12 h, typically 6 × the
# 15-minute function timeout = 90 minutes) times a few receives. An in-process dispatcher loses its messages with its
# process, so there the stall is one lease (Settings.processing_lease_s).
DURABLE_STALL_S = 6 * 3600.0
# Texts an embedder not measured yet embeds before an inline attach decides what fits its budget: enough to time
# a call (the rate is per chunk), few enough to cost a fraction of the budget on a slow CPU model (~20 ms each).
PROBE_CHUNKS = 8


@dataclass(slots=True)
class Outcome:
    """What one file's processing did (``engram ingest`` reports it): ``status`` is the file's (``completed``,
    ``failed``, ``in_progress``, ``skipped`` …) with ``error`` when failed; ``embedded``/``cached``: chunk vectors
    computed now vs reused from the embedding cache."""

    file_id: str
    filename: str
    status: FileStatus | Literal["skipped"]
    chunk_count: int = 0
    error: LastError | None = None
    embedded: int = 0
    cached: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def start(conn: psycopg.Connection, settings: Settings, tenant_id: str, store_id: str, file_ids: Iterable[str], *,
          source: tuple[str, str, str | None] | None = None) -> list[FileMessage]:
    """Claim a new version of each attached ``in_progress`` file (lease ``settings.processing_lease_s`` seconds);
    returns the ``ingest.file`` messages that process them (files not claimable are left out). ``source`` is the
    drop-folder object ``(bucket, key, etag)`` a single file ingests."""
    messages = []
    for file_id in file_ids:
        version = ingest_jobs.start(conn, tenant_id, store_id, file_id, lease_s=settings.processing_lease_s,
                                    max_attempts=settings.processing_max_attempts, source=source)
        if version is not None:
            messages.append(FileMessage(tenant_id, store_id, file_id, version))
    return messages


def send(conn: psycopg.Connection, settings: Settings, dispatcher: Dispatcher, messages: Sequence[FileMessage]) -> int:
    """Hand claimed versions to ``dispatcher``; returns how many were sent. A failed send is logged, not raised
    (the attach itself succeeded): the versions are abandoned and housekeeping re-sends the files."""
    try:
        dispatcher.send(messages)
    except EngramError as exc:
        logger.warning("could not dispatch %d file(s) (housekeeping retries): %s", len(messages), exc.message)
        for message in messages:
            ingest_jobs.abandon(conn, message.tenant, message.vector_store_id, message.file_id, message.version)
        return 0
    return len(messages)


def handle_file(message: FileMessage, delivery: Delivery) -> str:
    """The ``ingest.file`` handler (:mod:`chalicelib.dispatch.table`): :func:`stage` on a tenant connection."""
    from chalicelib import deps
    from chalicelib.store.db import tenant_connection

    with tenant_connection(delivery.settings, message.tenant) as conn:
        return stage(conn, delivery, deps.embedder(delivery.settings), message)


def handle_batch(message: BatchMessage, delivery: Delivery) -> str:
    """The ``embed.batch`` handler: :func:`land` on a tenant connection."""
    from chalicelib import deps
    from chalicelib.store.db import tenant_connection

    with tenant_connection(delivery.settings, message.tenant) as conn:
        return land(conn, delivery, deps.embedder(delivery.settings), message)


def give_up(message: FileMessage | BatchMessage, delivery: Delivery, error: BaseException) -> None:
    """The last allowed delivery of ``message`` failed with ``error``: fail its version's file with ``last_error``
    (its chunks removed, like every failed file) and the job ``failed`` — staged chunks are kept, so a redriven
    message can re-open and finish it."""
    from chalicelib.store.db import tenant_connection

    if isinstance(error, VersionFailedError):
        return  # its file already shows the failure; the message waits in the dead-letter queue
    with tenant_connection(delivery.settings, message.tenant) as conn:
        fail_version(conn, message.tenant, message.vector_store_id, message.file_id, message.version, error)


def fail_version(conn: psycopg.Connection, tenant_id: str, store_id: str, file_id: str, version: int,
                 error: BaseException) -> bool:
    """Fail the file of an open version with ``last_error`` from ``error``; returns whether it was failed now."""
    job = ingest_jobs.get(conn, tenant_id, store_id, file_id, version)
    if job is None or job.status not in ingest_jobs.OPEN:
        return False
    return _end(conn, job, "failed", error_of(error)) == "failed"


def stage(conn: psycopg.Connection, delivery: Delivery, embedder: Embedder, message: FileMessage, *,
          report: Outcome | None = None) -> str:
    """:func:`_stage`, then the file's points synced to Qdrant when its store lives there (a failure of that sync
    is left to the ``sync_vector_index`` job: the chunks are committed)."""
    result = _stage(conn, delivery, embedder, message, report=report)
    _sync_index(conn, delivery.settings, message.vector_store_id, message.file_id)
    return result


def _sync_index(conn: psycopg.Connection, settings: Settings, store_id: str, file_id: str) -> None:
    from chalicelib.search.backends import sync

    sync.after_write(conn, settings, store_id=store_id, file_id=file_id)


def _stage(conn: psycopg.Connection, delivery: Delivery, embedder: Embedder, message: FileMessage, *,
           report: Outcome | None = None) -> str:
    """Parse and chunk the version ``message`` names; inline, embed and swap the chunks in at once, otherwise stage
    them and send their embedding batches (a version already staged re-sends the batches that have not landed).
    ``report``, when given, receives the chunk and embedding counts of an inline run.
    Returns what happened: ``completed``, ``staged``, ``resent``, ``rejected`` (the document cannot be ingested,
    or its stored bytes are gone or changed: the file is ``failed``), ``superseded``, ``missing`` or the job's final
    status.

    Raises:
        UpstreamError / RateLimitError: S3, SQS or the embedding service failed (the message is retried).
        VersionFailedError: the version failed after this message was first received (left for the DLQ).
    """
    settings = delivery.settings
    context = _open(conn, settings, message, delivery.arrived_at)
    if isinstance(context, str):
        return context
    job = context.job
    if job.status == "embedding":
        _send_batches(delivery.dispatcher, job, ingest_jobs.outstanding_batches(conn, job))
        return "resent"
    try:
        data = _read(conn, settings, job)
    except FileContentError as exc:  # the bytes are gone or changed: retrying cannot help
        return _end(conn, job, "rejected", {"code": exc.code or "file_content_missing", "message": exc.message})
    if data is None:
        return _supersede(conn, job)
    strategy = resolve_chunking_strategy(context.chunking_strategy, embedder_max_tokens=embedder.max_input_tokens)
    try:
        document = parse_document(data, context.filename or "", limits=ParseLimits.from_settings(settings))
        chunks = chunk_document(document, strategy, embedder.tokenizer)
    except DocumentError as exc:
        return _end(conn, job, "rejected", {"code": exc.code or "invalid_file", "message": exc.message})
    sha256 = file_rows.sha256_hex(data)
    dispatcher = delivery.dispatcher
    if delivery.inline:
        if delivery.overflow is None or _fits(conn, job.tenant_id, embedder, [c.text for c in chunks],
                                              delivery.deadline):
            return _complete_now(conn, settings, job, embedder, chunks, sha256, data, report)
        dispatcher = delivery.overflow  # over the caller's time budget: staged and queued like any other file
        logger.info("%s v%d: %d chunks do not fit the inline budget; queued", job.file_id, job.version, len(chunks))
    batches = staged_chunks.batch_count(len(chunks), settings.embed_batch_chunks)
    # Two round trips: marking the version staged (which locks it), then the chunks, the digest and the lease with
    # the commit.
    with conn.transaction(), pipeline(conn):
        staged = ingest_jobs.set_staged(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version,
                                        chunk_count=len(chunks), batch_count=batches, content_sha256=sha256)
        if staged is None:  # staged or ended meanwhile by another delivery
            current = ingest_jobs.get(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
            return current.status if current else "missing"
        staged_chunks.stage(conn, staged, chunks, batch_chunks=settings.embed_batch_chunks)
        if staged.source_key:
            file_rows.set_digest(conn, job.tenant_id, job.file_id, data)
        ingest_jobs.heartbeat(conn, staged, lease_s=settings.processing_lease_s)
        if batches == 0:
            return _finalize(conn, settings, staged, embedder, [], [])
    _send_batches(dispatcher, job, range(batches))
    return "staged"


def _fits(conn: psycopg.Connection, tenant_id: str, embedder: Embedder, texts: Sequence[str],
          deadline: float | None) -> bool:
    """Whether embedding ``texts`` inline should end before ``deadline`` (``time.monotonic()`` seconds; None:
    always): the texts the tenant's embedding cache lacks, divided by the embedder's measured rate
    (:mod:`chalicelib.embed.rate`). An embedder not measured yet embeds probes of :data:`PROBE_CHUNKS` of them
    first, up to two (its first call is not measured); their vectors are cached, so no work is lost whichever way
    the file goes."""
    if deadline is None:
        return True
    hashes = {embedding_cache.text_hash(text): text for text in texts}
    cached = embedding_cache.lookup(conn, tenant_id, embedder.model, list(hashes))
    missing = [text for digest, text in hashes.items() if digest not in cached]
    for _ in range(2):  # the first call of an embedder is not measured (it may load the model)
        if not missing or embed_rate.chunks_per_s(embedder) is not None:
            break
        embed_with_cache(conn, tenant_id, embedder, missing[:PROBE_CHUNKS])
        missing = missing[PROBE_CHUNKS:]
    estimate = embed_rate.estimate_s(embedder, len(missing))
    return estimate is not None and time.monotonic() + estimate <= deadline


def land(conn: psycopg.Connection, delivery: Delivery, embedder: Embedder, message: BatchMessage) -> str:
    """Embed batch ``message.batch`` (through the tenant's embedding cache), store its vectors and count it; the
    batch that completes the count also swaps the version's chunks in, in the same transaction (and then syncs
    the file's points to Qdrant when its store lives there). Returns ``landed``, ``completed``, ``duplicate``,
    ``superseded``, ``rejected``, ``missing`` or the job's final status.

    Raises:
        UpstreamError / RateLimitError: the embedding service failed after its retries (the message is retried).
        VersionFailedError: the version failed after this message was first received (left for the DLQ).
    """
    result = _land(conn, delivery, embedder, message)
    if result != "landed":
        _sync_index(conn, delivery.settings, message.vector_store_id, message.file_id)
    return result


def _land(conn: psycopg.Connection, delivery: Delivery, embedder: Embedder, message: BatchMessage) -> str:
    settings = delivery.settings
    context = _open(conn, settings, message, delivery.arrived_at, batch=message.batch)
    if isinstance(context, str):
        return context
    job = context.job
    if job.status != "embedding" or context.batch_landed:
        return "duplicate" if job.status == "embedding" else job.status
    if context.store_model is not None:
        try:
            vector_stores.check_model(job.vector_store_id, context.store_model, context.store_dim or 0,
                                      embedder.model, embedder.dimension)
        except EmbeddingMismatchError as exc:
            return _end(conn, job, "rejected", {"code": exc.code or "embedding_model_mismatch",
                                                "message": exc.message})
    rows = staged_chunks.batch(conn, job, message.batch, model=embedder.model)
    vectors, fresh = _embed_missing(embedder, [chunk.text for chunk, _ in rows], [cached for _, cached in rows])
    # Round trips: the version's lock and count; the swap's guarded update (last batch); the rest with the commit.
    with conn.transaction(), pipeline(conn):
        locked, counted = ingest_jobs.land(conn, job, message.batch)
        if locked is None:
            return "missing"
        if counted is None:
            return "duplicate" if locked.status == "embedding" else locked.status
        embedding_cache.add(conn, job.tenant_id, embedder.model, fresh)
        done, total = counted
        if done < total:
            staged_chunks.set_vectors(conn, locked, [(chunk.index, v) for (chunk, _), v in zip(rows, vectors)])
            ingest_jobs.heartbeat(conn, locked, lease_s=settings.processing_lease_s)
            return "landed"
        chunks, all_vectors = [chunk for chunk, _ in rows], list(vectors)
        if total > 1:  # the other batches' vectors are staged
            others, other_vectors = staged_chunks.load(conn, locked, except_batch=message.batch)
            merged = sorted(zip(others + chunks, other_vectors + all_vectors), key=lambda pair: pair[0].index)
            chunks, all_vectors = [c for c, _ in merged], [v for _, v in merged]
        return _finalize(conn, settings, locked, embedder, chunks, all_vectors)


def _embed_missing(embedder: Embedder, texts: Sequence[str], cached: Sequence[Any]
                   ) -> tuple[list[Any], list[tuple[bytes, Any]]]:
    """Vectors for ``texts`` (n × dim) given the cached vector of each (None: not cached): the missing texts are
    embedded in one call (each distinct text once). Returns ``(vectors, fresh)``, ``fresh`` being the new
    ``(sha256, vector)`` pairs for the cache.

    Raises:
        UpstreamError / RateLimitError / InvalidRequestError: from the embedder.
    """
    missing: dict[bytes, str] = {}
    hashes: list[bytes | None] = []
    for text, vector in zip(texts, cached):
        digest = None if vector is not None else embedding_cache.text_hash(text)
        if digest is not None:
            missing.setdefault(digest, text)
        hashes.append(digest)
    computed = dict(zip(missing, embed_rate.embed_timed(embedder, list(missing.values())))) if missing else {}
    vectors = [vector if digest is None else computed[digest] for digest, vector in zip(hashes, cached)]
    return vectors, list(computed.items())


def embed_with_cache(conn: psycopg.Connection, tenant_id: str, embedder: Embedder,
                     texts: Sequence[str]) -> tuple[list[Any], int]:
    """Vectors for ``texts`` (n × dim) reusing the tenant's cached ones; returns ``(vectors, computed)`` where
    ``computed`` is how many texts were sent to the embedder. New vectors are added to the cache.

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
        vectors = embed_rate.embed_timed(embedder, list(missing.values()))
        fresh = list(zip(missing.keys(), vectors))
        embedding_cache.store(conn, tenant_id, embedder.model, fresh)
        cached.update(fresh)
    return [cached[d] for d in hashes], len(missing)


def retry_stalled(conn: psycopg.Connection, settings: Settings, dispatcher: Dispatcher, *, limit: int = 100,
                  tenant_id: str | None = None) -> int:
    """Housekeeping (one tenant's files, or every tenant's as the owner): claim again up to ``limit`` of the
    ``in_progress`` files whose lease ran out (or that waited a whole lease unclaimed) while attempts remain, and
    send their new versions; returns how many were sent. A version still open in a durable queue is left alone
    while it progressed within :data:`DURABLE_STALL_S`. Files out of attempts are left for
    :func:`attachments.settle` to fail.

    Raises:
        UpstreamError: the queue failed (the versions are abandoned, so the next pass tries again).
    """
    stall_s = DURABLE_STALL_S if dispatcher.durable else settings.processing_lease_s
    claimed = ingest_jobs.claim_stuck(conn, lease_s=settings.processing_lease_s,
                                      max_attempts=settings.processing_max_attempts, stall_s=stall_s, limit=limit,
                                      tenant_id=tenant_id)
    messages = [FileMessage(*row) for row in claimed]
    try:
        dispatcher.send(messages)
    except EngramError:
        for message in messages:
            ingest_jobs.abandon(conn, message.tenant, message.vector_store_id, message.file_id, message.version)
        raise
    return len(messages)


def error_of(error: BaseException) -> LastError:
    """``last_error`` for an exception: OpenAI's ``rate_limit_exceeded`` for a 429 that outlasted the retries,
    ``server_error`` otherwise (with our message, or a generic one for foreign exceptions)."""
    if isinstance(error, RateLimitError):
        return {"code": "rate_limit_exceeded", "message": error.message}
    if isinstance(error, EngramError):
        return {"code": "server_error", "message": error.message}
    return {"code": "server_error", "message": "Internal error while processing the file."}


class VersionFailedError(EngramError):
    """The message's version was failed after the message first arrived: it is a retry from the outage that failed
    the file, not a redrive. Re-opening on it would flip the file back to ``in_progress`` while the outage lasts, so
    the record is reported failed instead and reaches the dead-letter queue with its siblings; ``engram redrive``
    sends them again as new messages (first received after the failure), and those re-open the version."""


def _open(conn: psycopg.Connection, settings: Settings, message: FileMessage | BatchMessage,
          arrived_at: datetime | None, *, batch: int | None = None) -> ingest_jobs.Context | str:
    """The version's context (one statement) if there is work to do on it (re-opening a failed one), else what to
    answer."""
    tenant_id, store_id, file_id, version = (message.tenant, message.vector_store_id, message.file_id,
                                             message.version)
    context = ingest_jobs.context(conn, tenant_id, store_id, file_id, version, batch=batch)
    if context is None:
        return "missing"
    job = context.job
    if job.status in ingest_jobs.FINAL:
        return job.status
    if context.state == "gone":
        return _supersede(conn, job)
    if context.state == "failed" or job.status == "failed":
        failed_at = context.since if context.state == "failed" else job.updated_at
        if arrived_at is not None and failed_at is not None and arrived_at <= failed_at:
            raise VersionFailedError(f"{file_id} v{version} failed at {failed_at.isoformat()}, after this message "
                                     "arrived; redrive the dead-letter queue to retry it.")
        if not ingest_jobs.reopen(conn, job, lease_s=settings.processing_lease_s):
            return _supersede(conn, job)
        logger.info("re-opened %s v%d of %s", file_id, version, store_id)
        context = ingest_jobs.context(conn, tenant_id, store_id, file_id, version, batch=batch)
        if context is None:
            return "missing"
    return context


def _read(conn: psycopg.Connection, settings: Settings, job: Job) -> bytes | None:
    """The version's bytes: its drop-folder object at the ETag it announced (None: overwritten or deleted since),
    else the file's stored content."""
    if job.source_key:
        return blobs.read_object(job.source_bucket or "", job.source_key, job.source_etag, region=settings.aws_region)
    return file_rows.get_content(conn, job.tenant_id, job.file_id)


def _send_batches(dispatcher: Dispatcher, job: Job, batches: Iterable[int]) -> None:
    dispatcher.send([BatchMessage(job.tenant_id, job.vector_store_id, job.file_id, job.version, b)
                     for b in batches])


def _complete_now(conn: psycopg.Connection, settings: Settings, job: Job, embedder: Embedder, chunks: list[Chunk],
                  sha256: str, data: bytes, report: Outcome | None) -> str:
    """Inline: embed every chunk (through the cache) and swap them in, under the version's lock."""
    vectors, computed = embed_with_cache(conn, job.tenant_id, embedder, [c.text for c in chunks])
    if report is not None:
        report.chunk_count, report.embedded, report.cached = len(chunks), computed, len(chunks) - computed
    with conn.transaction(), pipeline(conn):
        locked = ingest_jobs.lock(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
        if locked is None or locked.status != "pending":
            return locked.status if locked else "missing"
        ingest_jobs.set_content(conn, locked, chunk_count=len(chunks), content_sha256=sha256)
        if locked.source_key:
            file_rows.set_digest(conn, job.tenant_id, job.file_id, data)
        return _finalize(conn, settings, locked, embedder, chunks, vectors, content_sha256=sha256)


def _finalize(conn: psycopg.Connection, settings: Settings, job: Job, embedder: Embedder, chunks: Sequence[Chunk],
              vectors: Sequence[Any], *, content_sha256: str | None = None) -> str:
    """Swap the version's chunks in (inside the caller's transaction, which holds the job's lock); on a backend
    that keeps its own copy their points are written before the commit, so the file is searchable once it shows
    ``completed``."""
    from chalicelib.search.backends import sync

    ahead = sync.lock_ahead(conn, settings, job.tenant_id, job.vector_store_id, job.file_id)
    if not attachments.complete(conn, job.tenant_id, job.vector_store_id, job.file_id, chunks=chunks,
                                vectors=vectors, dim=embedder.dimension,
                                content_sha256=content_sha256 or job.content_sha256 or "", attempt=job.version):
        _retire(conn, job, "superseded")
        return "superseded"
    if ahead:
        sync.write_ahead(conn, settings, job.tenant_id, job.vector_store_id, job.file_id, store=ahead)
    _retire(conn, job, "completed")
    return "completed"


def _retire(conn: psycopg.Connection, job: Job, status: VersionStatus, error: LastError | None = None) -> None:
    with pipeline(conn):
        ingest_jobs.set_status(conn, job, status, error)
        staged_chunks.discard(conn, job)
        ingest_jobs.clear_batches(conn, job)


def _supersede(conn: psycopg.Connection, job: Job) -> str:
    with conn.transaction():
        locked = ingest_jobs.lock(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
        if locked is not None and locked.status not in ingest_jobs.FINAL:
            _retire(conn, locked, "superseded")
    return "superseded"


def _end(conn: psycopg.Connection, job: Job, status: Literal["failed", "rejected"], error: LastError) -> str:
    """End an open version ``failed`` (staged chunks kept for a redrive) or ``rejected``, failing its file."""
    with conn.transaction():
        locked = ingest_jobs.lock(conn, job.tenant_id, job.vector_store_id, job.file_id, job.version)
        if locked is None or locked.status not in ingest_jobs.OPEN:
            return locked.status if locked else "missing"
        if status == "failed":
            ingest_jobs.set_status(conn, locked, status, error)
        else:
            _retire(conn, locked, status, error)
        attachments.fail(conn, job.tenant_id, job.vector_store_id, job.file_id, error=error, attempt=job.version)
    logger.info("%s %s v%d: %s (%s)", status, job.file_id, job.version, error["code"], error["message"])
    return status
