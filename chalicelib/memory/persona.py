"""The user persona (seed 002 §10): one profile document per user — preferences, how they want things done,
behaviour patterns — kept as a pinned memory of type ``persona`` in the user's scope, updated in place from the
user's extracted preference and procedural memories (a new version each time: :func:`store.revise` keeps the old
one as a closed row and writes the history), so a search finds it and ``as_of`` shows it as it was.

A user is due when one of their preference or procedural memories changed after their persona did. With a
memory model the document is written by it (:data:`PERSONA_PROMPT`); without one it is extractive: the memories
themselves, grouped (:func:`extractive_document`). At most :data:`MAX_SOURCE_MEMORIES` memories feed it (most
important, then most recent). Each update writes a ``persona_update`` audit row.
"""

from __future__ import annotations

import logging

import psycopg

from chalicelib import ids
from chalicelib.chat.base import ChatBackend, ChatMessage, ChatRequest
from chalicelib.embed.base import Embedder
from chalicelib.memory import audit, store
from chalicelib.memory.model import MemoryScope, text_hash

__all__ = ["PERSONA_PROMPT", "extractive_document", "refresh"]

logger = logging.getLogger("engram.memory")

MAX_SOURCE_MEMORIES = 40
MAX_DOCUMENT_CHARS = 4000
SOURCE_TYPES = ("preference", "procedural")

PERSONA_PROMPT = """You maintain a user's profile for an assistant. From the memories given, write the profile in \
three short sections with these headings: "Preferences:", "Communication style:", "Behaviour patterns:". Use \
bullet points, keep only what the memories say, and write in the memories' language. Answer with the profile \
text only."""

_ACTIVE = """archived_at IS NULL AND valid_to IS NULL AND superseded_by IS NULL AND consolidated_into IS NULL
    AND (expires_at IS NULL OR expires_at > now())"""
_DUE = f"""
SELECT m.tenant_id, m.user_id FROM memories m
WHERE (%(tenant)s::text IS NULL OR m.tenant_id = %(tenant)s) AND m.user_id IS NOT NULL
  AND m.memory_type = ANY(%(types)s) AND {_ACTIVE}
GROUP BY m.tenant_id, m.user_id
HAVING max(m.updated_at) > coalesce((SELECT max(p.updated_at) FROM memories p WHERE p.tenant_id = m.tenant_id
    AND p.user_id = m.user_id AND p.memory_type = 'persona' AND p.superseded_by IS NULL AND p.valid_to IS NULL),
    '-infinity')
ORDER BY 1, 2 LIMIT %(limit)s"""
_SOURCES = f"""SELECT memory_type, memory FROM memories
WHERE tenant_id = %(tenant)s AND user_id = %(user)s AND memory_type = ANY(%(types)s) AND {_ACTIVE}
ORDER BY importance DESC, updated_at DESC LIMIT %(limit)s"""
_CURRENT = """SELECT id, memory FROM memories WHERE tenant_id = %(tenant)s AND user_id = %(user)s
AND agent_id IS NULL AND run_id IS NULL AND memory_type = 'persona' AND superseded_by IS NULL AND valid_to IS NULL
FOR UPDATE"""


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
    changed = 0
    due = conn.execute(_DUE, {"tenant": tenant_id, "types": list(SOURCE_TYPES), "limit": limit}).fetchall()
    for tenant, user in due:
        sources = [(k, t) for k, t in conn.execute(_SOURCES, {"tenant": tenant, "user": user,
                                                               "types": list(SOURCE_TYPES),
                                                               "limit": MAX_SOURCE_MEMORIES}).fetchall()]
        document = _write(sources, backend, model)
        if not document:
            continue
        vector = embedder.embed([document])[0]
        scope = MemoryScope(user_id=user)
        with conn.transaction():
            store.lock_scope(conn, tenant, scope)
            current = conn.execute(_CURRENT, {"tenant": tenant, "user": user}).fetchone()
            if current is None:
                memory = store.insert(conn, tenant, ids.new_id(ids.MEMORY), store.NewMemory(
                    scope=scope, memory=document, hash=text_hash(document), memory_type="persona", categories=[],
                    confidence=1.0, importance=0.9, metadata={"sources": len(sources)}, source_kind="job",
                    source_id="persona", valid_from=None, pinned=True, expires_at=None, model=embedder.model,
                    embedding=vector, index_text=document, source_type="inferred"))
                store.record(conn, tenant, memory, scope, "ADD", old=None, new=document, actor=actor)
            else:
                memory, _ = store.revise(conn, tenant, current[0], text=document, hash=text_hash(document),
                                         index_text=document, model=embedder.model, embedding=vector,
                                         valid_from=None)
                store.record(conn, tenant, memory, scope, "UPDATE", old=current[1], new=document, actor=actor)
            audit.record(conn, tenant, "persona_update", "persona", memory.id, scope, actor=actor,
                         details={"sources": len(sources)})
        changed += 1
    return changed


def _write(sources: list[tuple[str, str]], backend: ChatBackend | None, model: str | None) -> str:
    if not sources:
        return ""
    if backend is None or model is None:
        return extractive_document(sources)
    listing = "\n".join(f"- ({kind}) {text}" for kind, text in sources)
    request = ChatRequest(model=model, messages=(ChatMessage("system", PERSONA_PROMPT),
                                                 ChatMessage("user", listing)), tool_choice="none", temperature=0.0)
    text = (backend.complete(request).text or "").strip()
    if not text:
        logger.warning("persona answer from %s was empty; using the extractive document", model)
        return extractive_document(sources)
    return text[:MAX_DOCUMENT_CHARS]
