"""Changing and removing memories by hand: update (a new version, the id kept), delete (a GDPR delete: the text
leaves every row), purge (a whole user's, agent's or run's memories and everything that holds their text), the
batch forms of update and delete, and feedback.

Each runs in one transaction under the scope's lock (:func:`chalicelib.memory.store.lock_scope`) and writes the
memory's history; a batch is one transaction (all of it, or — when any memory is missing or not current — none).
An update that changes nothing (no field given, or the same text) is a no-op: nothing is written, not even
history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import psycopg

from chalicelib.embed.base import Embedder
from chalicelib.errors import InvalidRequestError, NotFoundError
from chalicelib.memory import audit, store
from chalicelib.memory.model import Memory, MemoryScope, normalise, text_hash

__all__ = ["MemoryUpdate", "delete", "delete_many", "feedback", "index_text", "purge", "update", "update_many"]

FEEDBACK_VALUES = ("POSITIVE", "NEGATIVE", "VERY_NEGATIVE")


def index_text(text: str, metadata: dict) -> str:
    """What BM25 indexes and the embedder reads for a memory: its text after its speaker's name when the metadata
    names one (``metadata["speaker"]``): "Caroline: I went to the support group" is found by "Caroline"."""
    speaker = metadata.get("speaker")
    return f"{speaker}: {text}" if isinstance(speaker, str) and speaker else text


@dataclass(frozen=True, slots=True)
class MemoryUpdate:
    """One memory's update: new ``text`` (None: keep it), attribute ``edit`` and when a new text became true
    (``valid_from``; None: now)."""

    memory_id: str
    text: str | None = None
    edit: store.Edit = store.Edit()
    valid_from: datetime | None = None

    def fields(self) -> list[str]:
        """The attribute fields this change sets."""
        return sorted(k for k, v in self.edit.params().items() if v is not None and k != "set_expires") + (
            ["expires_at"] if self.edit.set_expires and self.edit.expires_at is None else [])


def update(conn: psycopg.Connection, tenant_id: str, memory_id: str, *, text: str | None, changes: store.Edit,
           embedder: Embedder, valid_from: datetime | None = None, actor: str = "api") -> Memory:
    """Update a memory. A new ``text`` (different once normalised) makes a new version: re-embedded, the old
    version kept as a closed row (visible with ``as_of``), an ``UPDATE`` in the history; attribute changes alone
    edit the memory in place (also recorded); nothing to change returns the memory untouched.

    Raises:
        NotFoundError: no such memory for this tenant.
        InvalidRequestError: (code ``memory_not_active``) the memory is an old version or was invalidated: update
            the current one.
        UpstreamError: embedding the new text failed (nothing written).
    """
    return update_many(conn, tenant_id, [MemoryUpdate(memory_id, text, changes, valid_from)], embedder=embedder,
                       actor=actor, param=None)[0]


def update_many(conn: psycopg.Connection, tenant_id: str, changes: Sequence[MemoryUpdate], *, embedder: Embedder,
                actor: str = "api", param: str | None = "memories") -> list[Memory]:
    """Apply ``changes`` in one transaction (new texts embedded in one call first); returns the memories after,
    in order. ``param``: the request field the changes came from, for errors (``memories[2].memory_id``).

    Raises:
        NotFoundError: a memory does not exist (nothing written).
        InvalidRequestError: (code ``memory_not_active``) a memory is not current (nothing written).
        UpstreamError: embedding failed (nothing written).
    """
    currents = [_current(conn, tenant_id, c.memory_id, _where(param, i)) for i, c in enumerate(changes)]
    revising = [c.text is not None and normalise(c.text) != normalise(m.memory) for c, m in zip(changes, currents)]
    texts = [index_text(c.text or "", _metadata(c, m)) for c, m, r in zip(changes, currents, revising) if r]
    vectors = iter(embedder.embed(texts) if texts else [])
    out: list[Memory] = []
    with conn.transaction():
        for change, current, revise in zip(changes, currents, revising):
            store.lock_scope(conn, tenant_id, current.scope)
            if revise and change.text is not None:
                metadata = _metadata(change, current)
                updated, snapshot = store.revise(
                    conn, tenant_id, current.id, text=change.text, hash=text_hash(change.text),
                    index_text=index_text(change.text, metadata), model=embedder.model, embedding=next(vectors),
                    valid_from=change.valid_from, edit=change.edit)
                store.record(conn, tenant_id, updated, updated.scope, "UPDATE", old=current.memory,
                             new=updated.memory, actor=actor, details={"previous_version": snapshot})
            elif change.fields():
                updated = store.edit(conn, tenant_id, current.id, change.edit)
                store.record(conn, tenant_id, updated, updated.scope, "UPDATE", old=current.memory,
                             new=updated.memory, actor=actor, details={"fields": change.fields()})
            else:
                updated = current  # nothing to change: no write, no history
            out.append(updated)
    return out


def delete(conn: psycopg.Connection, tenant_id: str, memory_id: str, *, actor: str = "api") -> bool:
    """Delete a memory and its earlier versions; their history keeps a ``DELETE`` event without any text. Returns
    False when there was no such memory."""
    with conn.transaction():
        try:
            current = store.get(conn, tenant_id, memory_id)
        except NotFoundError:
            return False
        _delete(conn, tenant_id, current, actor)
    return True


def delete_many(conn: psycopg.Connection, tenant_id: str, memory_ids: Sequence[str], *, actor: str = "api",
                param: str = "memories") -> int:
    """Delete every memory of ``memory_ids`` (with their versions) in one transaction; returns how many.

    Raises:
        NotFoundError: one of them does not exist (nothing deleted).
    """
    with conn.transaction():
        currents = [_exists(conn, tenant_id, memory_id, _where(param, i)) for i, memory_id in enumerate(memory_ids)]
        for current in currents:
            _delete(conn, tenant_id, current, actor)
    return len(currents)


def purge(conn: psycopg.Connection, tenant_id: str, scope: MemoryScope | None, *,
          actor: str = "api") -> dict[str, int]:
    """Remove a scope's memories and every row holding their text (history, add jobs, idempotency records, cached
    embeddings); returns rows removed per kind. Nothing of the scope's text is left in any table. ``scope`` None
    purges every scope of the tenant (an add committing while it runs is not waited for: it takes no scope lock)."""
    with conn.transaction():
        if scope is not None:
            store.lock_scope(conn, tenant_id, scope)
        counts = store.purge(conn, tenant_id, scope)
        audit.record(conn, tenant_id, "purge", "scope", None, scope, actor=actor, details=counts)
        return counts


def feedback(conn: psycopg.Connection, tenant_id: str, memory_id: str, *, value: str | None, reason: str | None,
             actor: str = "api") -> Memory:
    """Record feedback on a memory as a ``FEEDBACK`` event of its history (``details``: ``feedback``, one of
    :data:`FEEDBACK_VALUES` or None, and ``feedback_reason``); the memory itself is unchanged.

    Raises:
        NotFoundError: no such memory for this tenant.
    """
    current = store.get(conn, tenant_id, memory_id)
    store.record(conn, tenant_id, current, current.scope, "FEEDBACK", old=None, new=None, actor=actor,
                 details={"feedback": value, "feedback_reason": reason})
    return current


def _delete(conn: psycopg.Connection, tenant_id: str, current: Memory, actor: str) -> None:
    store.lock_scope(conn, tenant_id, current.scope)
    if store.delete(conn, tenant_id, current.id):
        store.record(conn, tenant_id, current.id, current.scope, "DELETE", old=None, new=None, actor=actor)


def _where(param: str | None, index: int) -> str:
    return f"{param}[{index}].memory_id" if param else "memory_id"


def _exists(conn: psycopg.Connection, tenant_id: str, memory_id: str, param: str) -> Memory:
    try:
        return store.get(conn, tenant_id, memory_id)
    except NotFoundError:
        raise NotFoundError(f"No memory found with id '{memory_id}'.", param=param) from None


def _current(conn: psycopg.Connection, tenant_id: str, memory_id: str, param: str) -> Memory:
    current = _exists(conn, tenant_id, memory_id, param)
    if current.superseded_by is not None or current.invalidated_by is not None:
        newer = current.superseded_by or current.invalidated_by
        raise InvalidRequestError(f"Memory '{memory_id}' is no longer current (replaced by '{newer}'); update that "
                                  "memory instead.", param=param, code="memory_not_active")
    return current


def _metadata(change: MemoryUpdate, current: Memory) -> dict:
    return change.edit.metadata if change.edit.metadata is not None else current.metadata
