"""Attaching files to a vector store and getting them processed: validate everything first (so a rejected request
writes nothing), attach in one transaction, then process inline when the request is small or hand the files to
background workers.

Inline processing covers the common case the SDK's ``upload_and_poll`` expects — a small file is ``completed`` in
the response — while large requests return ``in_progress`` at once. Either way each file is processed under a
lease (:mod:`chalicelib.store.processing`), so a request or worker that dies mid-way leaves a file that is retried
or failed, never one stuck ``in_progress``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import psycopg

from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.ingest.chunk import ChunkingStrategy, resolve_chunking_strategy
from chalicelib.ingest.parse import ParseLimits
from chalicelib.ingest.pipeline import IngestResult, process_file
from chalicelib.store import files as file_rows
from chalicelib.store import processing
from chalicelib.store.files import FileRow
from chalicelib.store.vector_stores import VectorStore

# Called with no arguments after files are left in_progress for background processing (the local worker's wake-up,
# or the SQS enqueue when deployed). Set by whoever runs workers in this process.
_on_pending: Callable[[], None] | None = None


def set_pending_listener(listener: Callable[[], None] | None) -> None:
    """Register the function told that files await background processing (None: nobody; they wait for a sweep)."""
    global _on_pending
    _on_pending = listener


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file ready to attach: the File row, its resolved chunking strategy and attributes (≤ 16 pairs)."""

    file: FileRow
    strategy: ChunkingStrategy
    attributes: dict[str, Any]


def prepare(conn: psycopg.Connection, tenant_id: str, entries: Sequence[tuple[str, dict[str, Any] | None, Any]], *,
            embedder: Embedder, param: Callable[[int, str], str]) -> list[Attachment]:
    """Check ``(file_id, attributes, chunking_strategy)`` entries without writing: ids well-formed, files exist,
    strategies valid. ``param(i, field)`` names the request field of entry ``i`` in errors.

    Raises:
        InvalidRequestError: a malformed id or strategy (400).
        NotFoundError: a file that does not exist for this tenant (404).
    """
    from chalicelib import ids

    prepared = []
    for index, (file_id, attributes, strategy) in enumerate(entries):
        ids.validate_id(file_id, ids.FILE, param=param(index, "file_id"))
        resolved = resolve_chunking_strategy(strategy, embedder_max_tokens=embedder.max_input_tokens,
                                             param=param(index, "chunking_strategy"))
        row = file_rows.get_file(conn, tenant_id, file_id)
        prepared.append(Attachment(row, resolved, dict(attributes or {})))
    return prepared


def attach_all(conn: psycopg.Connection, tenant_id: str, store_id: str, attachments: Sequence[Attachment]) -> None:
    """Attach each file as ``in_progress`` (re-attaching resets its status). Call inside the caller's transaction."""
    for item in attachments:
        file_rows.attach(conn, tenant_id, store_id, item.file.id, attributes=item.attributes,
                         chunking_strategy=item.strategy.to_openai())


def process_attached(conn: psycopg.Connection, tenant_id: str, store: VectorStore,
                     attachments: Sequence[Attachment], *, settings: Settings, embedder: Embedder) -> None:
    """Process the attached files inside this call when they total ≤ ``settings.inline_max_bytes``; otherwise
    leave them ``in_progress`` and hand them to the ingestion queue (``settings.ingest_queue`` set: deployed or
    the local stack) or notify the background workers."""
    if sum(item.file.bytes for item in attachments) > settings.inline_max_bytes:
        if settings.ingest_queue:
            from chalicelib.events.enqueue import enqueue_files

            enqueue_files(conn, tenant_id, store.id, [item.file.id for item in attachments], settings=settings)
        elif _on_pending is not None:
            _on_pending()
        return
    for item in attachments:
        attempt = processing.claim(conn, tenant_id, store.id, item.file.id, lease_s=settings.processing_lease_s,
                                   max_attempts=settings.processing_max_attempts)
        if attempt is not None:
            process_claimed(conn, tenant_id, store, item.file.id, attempt=attempt, embedder=embedder)


def process_claimed(conn: psycopg.Connection, tenant_id: str, store: VectorStore, file_id: str, *, attempt: int,
                    embedder: Embedder, limits: ParseLimits = ParseLimits()) -> IngestResult:
    """Process one file this caller holds the lease ``attempt`` on, reading its bytes, strategy and attributes
    from the database. Ends ``completed``/``failed`` (or ``superseded`` when cancelled meanwhile)."""
    attached = file_rows.get_store_file(conn, tenant_id, store.id, file_id)
    data = file_rows.get_content(conn, tenant_id, file_id)
    strategy = resolve_chunking_strategy(attached.chunking_strategy, embedder_max_tokens=embedder.max_input_tokens)
    return process_file(conn, tenant_id, store, file_id, filename=attached.filename, data=data, embedder=embedder,
                        strategy=strategy, attributes=attached.attributes, limits=limits, attempt=attempt)
