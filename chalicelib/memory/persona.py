"""The user persona (seed 002 §10): one profile document per user — preferences, how they want things done,
behaviour patterns — kept as a pinned memory of type ``persona`` in the user's scope, updated in place from the
user's extracted preference and procedural memories (a new version each time: :func:`store.revise` keeps the old
one as a closed row and writes the history), so a search finds it and ``as_of`` shows it as it was.

A user is due when one of their preference or procedural memories changed after their persona did. With a
memory model the document is written by it (:data:`chalicelib.chat.prompts.PERSONA`, recorded as the persona's
``prompt_version``); without one it is extractive: the memories themselves, grouped (:func:`extractive_document`).
At most :data:`MAX_SOURCE_MEMORIES` memories feed it (most important, then most recent). Each update writes a
``persona_update`` audit row. :func:`refresh_user` rewrites one user's persona on demand (mem0's
``generate_profile``).
"""

from __future__ import annotations

import logging

import psycopg

from chalicelib import ids
from chalicelib.chat import prompts
from chalicelib.chat.base import ChatBackend, ChatMessage, ChatRequest
from chalicelib.embed.base import Embedder
from chalicelib.memory import active, audit, store
from chalicelib.memory.model import MemoryScope, text_hash

__all__ = ["current_persona", "extractive_document", "refresh", "refresh_user"]

logger = logging.getLogger("engram.memory")

MAX_SOURCE_MEMORIES = 40
MAX_DOCUMENT_CHARS = 4000
SOURCE_TYPES = ("preference", "procedural")

_DUE = f"""
SELECT m.tenant_id, m.user_id FROM memories m
WHERE (%(tenant)s::text IS NULL OR m.tenant_id = %(tenant)s) AND m.user_id IS NOT NULL
  AND m.memory_type = ANY(%(types)s) AND {active.active('m')}
GROUP BY m.tenant_id, m.user_id
HAVING max(m.updated_at) > coalesce((SELECT max(p.updated_at) FROM memories p WHERE p.tenant_id = m.tenant_id
    AND p.user_id = m.user_id AND p.memory_type = 'persona' AND {active.current('p')}), '-infinity')
ORDER BY 1, 2 LIMIT %(limit)s"""
_SOURCES = f"""SELECT memory_type, memory FROM memories
WHERE tenant_id = %(tenant)s AND user_id = %(user)s AND memory_type = ANY(%(types)s) AND {active.ACTIVE}
ORDER BY importance DESC, updated_at DESC LIMIT %(limit)s"""
# The current persona (the partial unique index memories_persona holds one per user).
_CURRENT = f"""SELECT id, memory FROM memories WHERE tenant_id = %(tenant)s AND user_id = %(user)s
AND agent_id IS NULL AND run_id IS NULL AND memory_type = 'persona' AND {active.current()}
FOR UPDATE"""
_CURRENT_ID = _CURRENT.removesuffix("\nFOR UPDATE")


def extractive_document(sources: list[tuple[str, str]]) -> str:
    """The persona without a model: ``Preferences:`` then ``How they want things done:``, one bullet per
    memory, in the order given."""
    sections = []
    for kind, title in (("preference", "Preferences:"), ("procedural", "How they want things done:")):
        lines = [f"- {text}" for k, text in sources if k == kind]
        if lines:
            sections.append("\n".join([title, *lines]))
    return "\n\n".join(sections)[:MAX_DOCUMENT_CHARS]


def refresh(conn: psycopg.Connection, *, tenant_id: str | None, limit: int, embedder: Embedder,
            backend: ChatBackend | None, model: str | None, actor: str) -> int:
    """Rewrite the persona of up to ``limit`` due users; returns how many changed."""
    due = conn.execute(_DUE, {"tenant": tenant_id, "types": list(SOURCE_TYPES), "limit": limit}).fetchall()
    return sum(refresh_user(conn, tenant, user, embedder=embedder, backend=backend, model=model, actor=actor)
               is not None for tenant, user in due)


def refresh_user(conn: psycopg.Connection, tenant_id: str, user_id: str, *, embedder: Embedder,
                 backend: ChatBackend | None, model: str | None, actor: str) -> str | None:
    """Rewrite one user's persona now from their preference and procedural memories; returns the persona
    memory's id, or None when the user has none of those memories (nothing to write).

    Raises:
        UpstreamError / UpstreamTimeoutError / RateLimitError: the model or the embedder failed (nothing written).
    """
    sources = [(k, t) for k, t in conn.execute(_SOURCES, {"tenant": tenant_id, "user": user_id,
                                                           "types": list(SOURCE_TYPES),
                                                           "limit": MAX_SOURCE_MEMORIES}).fetchall()]
    document, prompt = _write(sources, backend, model)
    if not document:
        return None
    vector = embedder.embed([document])[0]
    scope = MemoryScope(user_id=user_id)
    with conn.transaction():
        store.lock_scope(conn, tenant_id, scope)
        current = conn.execute(_CURRENT, {"tenant": tenant_id, "user": user_id}).fetchone()
        if current is None:
            memory = store.insert(conn, tenant_id, ids.new_id(ids.MEMORY), store.NewMemory(
                scope=scope, memory=document, hash=text_hash(document), memory_type="persona", categories=[],
                confidence=1.0, importance=0.9, metadata={"sources": len(sources)}, source_kind="job",
                source_id="persona", valid_from=None, pinned=True, expires_at=None, model=embedder.model,
                embedding=vector, index_text=document, source_type="inferred", prompt_version=prompt))
            store.record(conn, tenant_id, memory, scope, "ADD", old=None, new=document, actor=actor)
        else:
            memory, _ = store.revise(conn, tenant_id, current[0], text=document, hash=text_hash(document),
                                     index_text=document, model=embedder.model, embedding=vector, valid_from=None,
                                     prompt_version=prompt)
            store.record(conn, tenant_id, memory, scope, "UPDATE", old=current[1], new=document, actor=actor)
        audit.record(conn, tenant_id, "persona_update", "persona", memory.id, scope, actor=actor,
                     details={"sources": len(sources)})
    return memory.id


def current_persona(conn: psycopg.Connection, tenant_id: str, user_id: str) -> str | None:
    """The id of the user's current persona memory, or None."""
    row = conn.execute(_CURRENT_ID, {"tenant": tenant_id, "user": user_id}).fetchone()
    return row[0] if row else None


def _write(sources: list[tuple[str, str]], backend: ChatBackend | None,
           model: str | None) -> tuple[str, str | None]:
    """``(document, prompt tag)``: the model's (tagged) or the extractive one (untagged); ``""`` without
    sources."""
    if not sources:
        return "", None
    if backend is None or model is None:
        return extractive_document(sources), None
    listing = "\n".join(f"- ({kind}) {text}" for kind, text in sources)
    request = ChatRequest(model=model, messages=(ChatMessage("system", prompts.PERSONA.system),
                                                 ChatMessage("user", listing)), tool_choice="none", temperature=0.0)
    text = (backend.complete(request).text or "").strip()
    if not text:
        logger.warning("persona answer from %s was empty; using the extractive document", model)
        return extractive_document(sources), None
    return text[:MAX_DOCUMENT_CHARS], prompts.PERSONA.tag
