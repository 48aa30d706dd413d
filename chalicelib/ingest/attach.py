"""Attaching files to a vector store and getting them processed: validate everything first (so a rejected request
writes nothing), attach in one transaction, then run the ingestion engine (:mod:`chalicelib.ingest.engine`) inline
when the request is small or hand the files to the dispatcher.

Inline processing covers the common case the SDK's ``upload_and_poll`` expects — a small file is ``completed`` in
the response — while large requests return ``in_progress`` at once. Either way each file is processed under a
lease (:mod:`chalicelib.store.attachments`), so a request or worker that dies mid-way leaves a file that is retried
or failed, never one stuck ``in_progress``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from chalicelib.config import Settings
from chalicelib.dispatch.local import LocalDispatcher
from chalicelib.dispatch.port import Dispatcher
from chalicelib.embed.base import Embedder
from chalicelib.errors import NotFoundError
from chalicelib.ingest import engine
from chalicelib.ingest.chunk import ChunkingStrategy, resolve_chunking_strategy
from chalicelib.store import attachments as attachment_rows
from chalicelib.store import files as file_rows
from chalicelib.store.files import FileRow
from chalicelib.store.vector_stores import VectorStore


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file ready to attach: the File row, its resolved chunking strategy and attributes (≤ 16 pairs)."""

    file: FileRow
    strategy: ChunkingStrategy
    attributes: dict[str, Any]


def prepare(conn: psycopg.Connection, tenant_id: str, entries: Sequence[tuple[str, dict[str, Any] | None, Any]], *,
            embedder: Embedder, param: Callable[[int, str], str]) -> list[Attachment]:
    """Check ``(file_id, attributes, chunking_strategy)`` entries without writing: ids well-formed, files exist,
    strategies valid. ``param(i, field)`` names the request field of entry ``i`` in errors (``file_ids[3]``,
    ``files[1].chunking_strategy``).

    Raises:
        InvalidRequestError: a malformed id or strategy (400).
        NotFoundError: a file that does not exist for this tenant (404, ``param`` its field).
    """
    from chalicelib import ids

    prepared = []
    for index, (file_id, attributes, strategy) in enumerate(entries):
        ids.validate_id(file_id, ids.FILE, param=param(index, "file_id"))
        resolved = resolve_chunking_strategy(strategy, embedder_max_tokens=embedder.max_input_tokens,
                                             param=param(index, "chunking_strategy"))
        try:
            row = file_rows.get_file(conn, tenant_id, file_id)
        except NotFoundError as exc:
            raise NotFoundError(exc.message, param=param(index, "file_id"), code=exc.code) from None
        prepared.append(Attachment(row, resolved, dict(attributes or {})))
    return prepared


def attach_all(conn: psycopg.Connection, tenant_id: str, store_id: str, attachments: Sequence[Attachment], *,
               param: str = "file_id") -> None:
    """Attach each file as ``in_progress`` (re-attaching resets its status) after checking the tenant's limits
    (:func:`chalicelib.store.tenants.check_store_capacity`; ``param`` names the request field in its error). Call
    inside the caller's transaction.

    Raises:
        InvalidRequestError: a tenant limit would be exceeded (nothing is attached).
    """
    from chalicelib.store import tenants

    if attachments:
        tenants.check_store_capacity(conn, tenant_id, store_id, [a.file.id for a in attachments],
                                     sum(a.file.bytes for a in attachments), param=param)
    for item in attachments:
        attachment_rows.attach(conn, tenant_id, store_id, item.file.id, attributes=item.attributes,
                               chunking_strategy=item.strategy.to_openai())


def process_attached(conn: psycopg.Connection, tenant_id: str, store: VectorStore,
                     attachments: Sequence[Attachment], *, settings: Settings, dispatcher: Dispatcher) -> None:
    """Claim a version of each attached file and process it: inside this call when ``settings.inline_ingest``
    and the files total ≤ ``settings.inline_max_bytes`` (the caller gets them ``completed`` or ``failed``),
    otherwise through ``dispatcher`` (SQS when deployed, background threads locally), leaving them
    ``in_progress``. Only the inline path imports the parsers."""
    messages = engine.start(conn, settings, tenant_id, store.id, [item.file.id for item in attachments])
    inline = settings.inline_ingest and sum(item.file.bytes for item in attachments) <= settings.inline_max_bytes
    if not inline:
        engine.send(conn, settings, dispatcher, messages)
        return
    LocalDispatcher(settings, threads=0).send(messages)
