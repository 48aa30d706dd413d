"""Attaching files to a vector store and getting them processed: validate everything first (so a rejected request
writes nothing), attach in one transaction, then run the ingestion engine (:mod:`chalicelib.ingest.engine`) inline
when the request is small or hand the files to the dispatcher.

Inline processing covers the common case the SDK's ``upload_and_poll`` expects — a small file is ``completed`` in
the response — while large requests return ``in_progress`` at once, and so does whatever of a small request does not
fit a few seconds (``Settings.inline_budget_s``) at the embedder's measured rate: no request holds its client for
long, and the SDK's ``*_and_poll`` helpers poll for the rest. Either way each file is processed under a
lease (:mod:`chalicelib.store.attachments`), so a request or worker that dies mid-way leaves a file that is retried
or failed, never one stuck ``in_progress``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from chalicelib.config import Settings
from chalicelib.dispatch.local import LocalDispatcher
from chalicelib.dispatch.port import Dispatcher
from chalicelib.embed.base import Embedder
from chalicelib.errors import InvalidRequestError, NotFoundError
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
            embedder: Embedder, settings: Settings, param: Callable[[int, str], str]) -> list[Attachment]:
    """Check ``(file_id, attributes, chunking_strategy)`` entries without writing: ids well-formed, files exist,
    strategies valid, and no file that its size alone shows ingestion would refuse (:func:`parse.refusal_by_size`
    under ``settings``' parse limits). ``param(i, field)`` names the request field of entry ``i`` in errors
    (``file_ids[3]``, ``files[1].chunking_strategy``).

    Raises:
        InvalidRequestError: a malformed id or strategy (400); a file too large to ingest (400 ``file_too_large``,
            the message naming the setting).
        NotFoundError: a file that does not exist for this tenant (404, ``param`` its field).
    """
    from chalicelib import ids
    from chalicelib.ingest import parse

    prepared = []
    for index, (file_id, attributes, strategy) in enumerate(entries):
        ids.validate_id(file_id, ids.FILE, param=param(index, "file_id"))
        resolved = resolve_chunking_strategy(strategy, embedder_max_tokens=embedder.max_input_tokens,
                                             param=param(index, "chunking_strategy"))
        try:
            row = file_rows.get_file(conn, tenant_id, file_id)
        except NotFoundError as exc:
            raise NotFoundError(exc.message, param=param(index, "file_id"), code=exc.code) from None
        too_large = parse.refusal_by_size(row.filename, row.bytes, parse.ParseLimits.from_settings(settings))
        if too_large is not None:
            raise InvalidRequestError(f"{too_large}; ingestion would refuse it.", param=param(index, "file_id"),
                                      code="file_too_large")
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
    """Claim a version of each attached file and process it: inside this call when ``settings.inline_ingest`` and
    the files total ≤ ``settings.inline_max_bytes`` bytes, as far as ``settings.inline_budget_s`` seconds allow (the
    caller gets those files ``completed`` or ``failed``), the rest through ``dispatcher`` (SQS when deployed,
    background threads locally), left ``in_progress`` for the caller to poll. A file is kept inline when the chunks
    it still needs embedded fit the time left at the embedder's measured rate (:func:`engine.stage`); once the budget
    is spent the remaining files are queued without being read. The request therefore ends about
    ``inline_budget_s`` after the processing starts, plus the parse of one file. Only the inline path imports the
    parsers."""
    messages = engine.start(conn, settings, tenant_id, store.id, [item.file.id for item in attachments])
    if (not settings.inline_ingest or settings.inline_budget_s <= 0
            or sum(item.file.bytes for item in attachments) > settings.inline_max_bytes):
        engine.send(conn, settings, dispatcher, messages)
        return
    deadline = time.monotonic() + settings.inline_budget_s
    inline = LocalDispatcher(settings, threads=0, deadline=deadline, overflow=dispatcher)
    for index, message in enumerate(messages):
        if time.monotonic() >= deadline:
            engine.send(conn, settings, dispatcher, messages[index:])
            return
        inline.send([message])
