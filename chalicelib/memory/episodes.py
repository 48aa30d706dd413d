"""Episodes and instances (seed 002 §6-9): conversations become searchable summaries, and old ones are compressed.

- **Episodize**: the exchanges of a thread (:mod:`chalicelib.memory.exchanges`) that no episode has taken yet,
  once the thread has been quiet for :data:`EPISODE_AFTER_S` (6 hours), become one **episode**: a memory of type
  ``episode`` whose text is its summary ("key: description"), with the summary's tags as categories, its
  importance, the date range (``valid_from`` = the first exchange; ``metadata.date_from``/``date_to``) and the
  raw messages kept in ``episode_messages``. The summary comes from the memory model when one is configured
  (:data:`chalicelib.chat.prompts.EPISODE_SUMMARY`, recorded as the episode's ``prompt_version``); otherwise, or
  when the model answers malformed JSON twice, it is extractive (documented in :func:`extractive_summary`).
- **Instancize**: an episode older than :data:`INSTANCE_AFTER_DAYS` (30 days) becomes an **instance**: type
  ``instance``, the raw messages compressed (zlib, JSON) into ``archived_data``, the summary kept searchable.

Both run per thread or per episode in one transaction that re-checks its predicate under a row lock, so a
repeated, resumed or concurrent run never makes an episode twice; both write the lifecycle audit.
"""

from __future__ import annotations

import json
import logging
import re
import zlib
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from chalicelib import ids
from chalicelib.chat import prompts, structured
from chalicelib.chat.base import ChatBackend
from chalicelib.embed.base import Embedder
from chalicelib.memory import audit, store
from chalicelib.memory.model import MemoryScope, text_hash

__all__ = ["EPISODE_AFTER_S", "INSTANCE_AFTER_DAYS", "Summary", "decompress", "episodize",
           "extractive_summary", "instancize"]

logger = logging.getLogger("engram.memory")

EPISODE_AFTER_S = 6 * 3600  # issue 14: threads quiet for 6 hours
INSTANCE_AFTER_DAYS = 30  # seed 002 §6-7: episodes are < 30 days old, instances older
KEY_CHARS = 120
DESCRIPTION_CHARS = 600
MAX_TAGS = 5

_DUE_THREADS = """
SELECT tenant_id, thread_id FROM exchanges
WHERE (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s) AND episode_id IS NULL
GROUP BY tenant_id, thread_id
HAVING max(created_at) < now() - make_interval(secs => %(quiet)s)
ORDER BY tenant_id, thread_id LIMIT %(limit)s"""
_THREAD_EXCHANGES = """
SELECT id, user_id, agent_id, run_id, user_prompt, assistant_response, created_at FROM exchanges
WHERE tenant_id = %(tenant)s AND thread_id = %(thread)s AND episode_id IS NULL ORDER BY seq"""
_TAKE = """UPDATE exchanges SET episode_id = %(episode)s
WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s) AND episode_id IS NULL"""
_LOCK_THREAD = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 2))"
_DUE_EPISODES = """
SELECT id, tenant_id, user_id, agent_id, run_id, episode_messages FROM memories
WHERE (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s) AND memory_type = 'episode'
  AND episode_messages IS NOT NULL AND created_at < now() - make_interval(days => %(days)s)
ORDER BY tenant_id, created_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED"""
_INSTANCIZE = """UPDATE memories SET memory_type = 'instance', archived_data = %(data)s, episode_messages = NULL,
    updated_at = now()
WHERE id = %(id)s AND memory_type = 'episode'"""
_WORD = re.compile(r"[^\W\d_]{5,}", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Summary:
    """An episode's summary (seed 002 §8): ``key`` (title), ``description``, ``tags``, ``importance`` in [0, 1], and
    the ``prompt`` tag of the model's prompt that wrote it (None: extractive)."""

    key: str
    description: str
    tags: list[str]
    importance: float
    prompt: str | None = None


def episodize(conn: psycopg.Connection, *, tenant_id: str | None, limit: int, embedder: Embedder,
              backend: ChatBackend | None, model: str | None, actor: str) -> int:
    """Turn up to ``limit`` quiet threads into episodes; returns how many episodes were made."""
    made = 0
    due = conn.execute(_DUE_THREADS, {"tenant": tenant_id, "quiet": EPISODE_AFTER_S, "limit": limit}).fetchall()
    for tenant, thread in due:
        rows = conn.execute(_THREAD_EXCHANGES, {"tenant": tenant, "thread": thread}).fetchall()
        if not rows:
            continue
        scope = MemoryScope(rows[0][1], rows[0][2], rows[0][3])
        rows = [r for r in rows if (r[1], r[2], r[3]) == (scope.user_id, scope.agent_id, scope.run_id)]
        messages = [m for r in rows for m in ({"role": "user", "content": r[4], "created_at": r[6].isoformat()},
                                             {"role": "assistant", "content": r[5],
                                              "created_at": r[6].isoformat()})]
        summary = _summarize(messages, backend, model)
        text = f"{summary.key}: {summary.description}"
        vector = embedder.embed([text])[0]
        with conn.transaction():
            conn.execute(_LOCK_THREAD, (f"{tenant}/{thread}",))
            still = conn.execute(_THREAD_EXCHANGES, {"tenant": tenant, "thread": thread}).fetchall()
            if {r[0] for r in still} < {r[0] for r in rows} or not still:
                continue  # another run took them meanwhile
            episode = _insert(conn, tenant, scope, thread, rows, messages, summary, text, vector, embedder.model)
            conn.execute(_TAKE, {"tenant": tenant, "episode": episode, "ids": [r[0] for r in rows]})
            store.record(conn, tenant, episode, scope, "ADD", old=None, new=text, actor=actor,
                         details={"thread_id": thread, "exchanges": len(rows)})
            audit.record(conn, tenant, "episode_created", "episode", episode, scope, actor=actor,
                         details={"thread_id": thread, "exchanges": len(rows)})
        made += 1
    return made


def instancize(conn: psycopg.Connection, *, tenant_id: str | None, limit: int, actor: str) -> int:
    """Turn up to ``limit`` episodes older than :data:`INSTANCE_AFTER_DAYS` into instances; returns how many."""
    with conn.transaction():
        rows = conn.execute(_DUE_EPISODES, {"tenant": tenant_id, "days": INSTANCE_AFTER_DAYS,
                                            "limit": limit}).fetchall()
        for memory_id, tenant, user_id, agent_id, run_id, messages in rows:
            raw = json.dumps(messages, ensure_ascii=False).encode("utf-8")
            packed = zlib.compress(raw, 9)
            conn.execute(_INSTANCIZE, {"id": memory_id, "data": packed})
            scope = MemoryScope(user_id, agent_id, run_id)
            audit.record(conn, tenant, "instance_migration", "instance", memory_id, scope, actor=actor)
            audit.record(conn, tenant, "compression", "instance", memory_id, scope, actor=actor,
                         details={"bytes_before": len(raw), "bytes_after": len(packed)})
    return len(rows)


def decompress(data: bytes) -> list[dict[str, Any]]:
    """An instance's raw messages from its ``archived_data``."""
    messages: list[dict[str, Any]] = json.loads(zlib.decompress(data).decode("utf-8"))
    return messages


def extractive_summary(messages: list[dict[str, Any]]) -> Summary:
    """The summary made without a model: the key is the first user message (first :data:`KEY_CHARS` characters),
    the description the user's messages in order then the first answer (together at most
    :data:`DESCRIPTION_CHARS`), the tags the :data:`MAX_TAGS` most frequent words of five letters or more, the
    importance 0.5 (neutral)."""
    said = [" ".join(m["content"].split()) for m in messages if m["role"] == "user"]
    answers = [" ".join(m["content"].split()) for m in messages if m["role"] == "assistant"]
    key = _clip(said[0] if said else (answers[0] if answers else "conversation"), KEY_CHARS)
    description = _clip(" | ".join(said + answers[:1]), DESCRIPTION_CHARS)
    words = Counter(w.casefold() for m in messages for w in _WORD.findall(m["content"]))
    return Summary(key=key, description=description, tags=[w for w, _ in words.most_common(MAX_TAGS)],
                   importance=0.5)


def _summarize(messages: list[dict[str, Any]], backend: ChatBackend | None, model: str | None) -> Summary:
    if backend is None or model is None:
        return extractive_summary(messages)
    transcript = "\n".join(f"{m['created_at'][:10]} {m['role']}: {m['content']}" for m in messages)
    try:
        answer: structured.Answer[Any] = structured.ask(backend, model, prompts.EPISODE_SUMMARY, transcript)
    except structured.MalformedAnswer as exc:
        logger.warning("episode summary from %s was malformed (%s); using the extractive summary", model,
                       exc.problem)
        return extractive_summary(messages)
    summary: prompts.EpisodeSummary = answer.value
    return Summary(_clip(summary.key, KEY_CHARS), _clip(summary.description, DESCRIPTION_CHARS),
                   list(summary.tags)[:MAX_TAGS], summary.importance, prompt=answer.prompt)


def _insert(conn: psycopg.Connection, tenant: str, scope: MemoryScope, thread: str, rows: list,
            messages: list[dict[str, Any]], summary: Summary, text: str, vector: Any, model: str) -> str:
    date_from: datetime = rows[0][6]
    date_to: datetime = rows[-1][6]
    new = store.NewMemory(scope=scope, memory=text, hash=text_hash(text), memory_type="episode",
                          categories=summary.tags, confidence=1.0, importance=summary.importance,
                          metadata={"key": summary.key, "description": summary.description,
                                    "date_from": date_from.isoformat(), "date_to": date_to.isoformat(),
                                    "message_count": len(messages), "thread_id": thread},
                          source_kind="conversation", source_id=thread, valid_from=date_from, pinned=False,
                          expires_at=None, model=model, embedding=vector, index_text=text,
                          episode_messages=messages, prompt_version=summary.prompt)
    return store.insert(conn, tenant, ids.new_id(ids.MEMORY), new).id


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"
