"""Changing and removing memories by hand: update (a new version, the id kept), delete (a GDPR delete: the text
leaves every row) and purge (a whole user's, agent's or run's memories and everything that holds their text).

Each runs in one transaction under the scope's lock (:func:`chalicelib.memory.store.lock_scope`) and writes the
memory's history.
"""

from __future__ import annotations

from datetime import datetime

import psycopg

from chalicelib.embed.base import Embedder
from chalicelib.errors import InvalidRequestError, NotFoundError
from chalicelib.memory import audit, store
from chalicelib.memory.model import Memory, MemoryScope, normalise, text_hash

__all__ = ["delete", "index_text", "purge", "update"]

ACTOR = "api"


def index_text(text: str, metadata: dict) -> str:
    """What BM25 indexes and the embedder reads for a memory: its text after its speaker's name when the metadata
    names one (``metadata["speaker"]``): "Caroline: I went to the support group" is found by "Caroline"."""
    speaker = metadata.get("speaker")
    return f"{speaker}: {text}" if isinstance(speaker, str) and speaker else text


def update(conn: psycopg.Connection, tenant_id: str, memory_id: str, *, text: str | None, changes: store.Edit,
           embedder: Embedder, valid_from: datetime | None = None) -> Memory:
    """Update a memory. A new ``text`` (different once normalised) makes a new version: re-embedded, the old
    version kept as a closed row (visible with ``as_of``), an ``UPDATE`` in the history; attribute changes alone
    edit the memory in place (also recorded).

    Raises:
        NotFoundError: no such memory for this tenant.
        InvalidRequestError: (code ``memory_not_active``) the memory is an old version or was invalidated: update
            the current one.
        UpstreamError: embedding the new text failed (nothing written).
    """
    current = store.get(conn, tenant_id, memory_id)
    if current.superseded_by is not None or current.invalidated_by is not None:
        newer = current.superseded_by or current.invalidated_by
        raise InvalidRequestError(f"Memory '{memory_id}' is no longer current (replaced by '{newer}'); update that "
                                  "memory instead.", param="memory_id", code="memory_not_active")
    revising = text is not None and normalise(text) != normalise(current.memory)
    metadata = changes.metadata if changes.metadata is not None else current.metadata
    vector = embedder.embed([index_text(text, metadata)])[0] if revising and text is not None else None
    with conn.transaction():
        store.lock_scope(conn, tenant_id, current.scope)
        if text is not None and vector is not None:
            updated, snapshot = store.revise(conn, tenant_id, memory_id, text=text, hash=text_hash(text),
                                             index_text=index_text(text, metadata), model=embedder.model,
                                             embedding=vector, valid_from=valid_from, edit=changes)
            store.record(conn, tenant_id, updated, updated.scope, "UPDATE", old=current.memory, new=updated.memory,
                         actor=ACTOR, details={"previous_version": snapshot})
            return updated
        updated = store.edit(conn, tenant_id, memory_id, changes)
        fields = sorted(k for k, v in changes.params().items() if v is not None and k != "set_expires")
        store.record(conn, tenant_id, updated, updated.scope, "UPDATE", old=current.memory, new=updated.memory,
                     actor=ACTOR, details={"fields": fields})
        return updated


def delete(conn: psycopg.Connection, tenant_id: str, memory_id: str) -> bool:
    """Delete a memory and its earlier versions; their history keeps a ``DELETE`` event without any text. Returns
    False when there was no such memory."""
    with conn.transaction():
        try:
            current = store.get(conn, tenant_id, memory_id)
        except NotFoundError:
            return False
        store.lock_scope(conn, tenant_id, current.scope)
        if not store.delete(conn, tenant_id, memory_id):
            return False
        store.record(conn, tenant_id, memory_id, current.scope, "DELETE", old=None, new=None, actor=ACTOR)
    return True


def purge(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope) -> dict[str, int]:
    """Remove a scope's memories and every row holding their text (history, add jobs, idempotency records, cached
    embeddings); returns rows removed per kind. Nothing of the scope's text is left in any table."""
    with conn.transaction():
        store.lock_scope(conn, tenant_id, scope)
        counts = store.purge(conn, tenant_id, scope)
        audit.record(conn, tenant_id, "purge", "scope", None, scope, actor=ACTOR, details=counts)
        return counts
