"""Store rows → OpenAI wire objects (OPENAI-COMPAT.md §1–3): exact field names, ``object`` literals and integer
Unix-second timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from chalicelib.memory import AddJob, AddResult, AuditRow, Entity, Exchange, HistoryRow, Hit, Memory
from chalicelib.responses.agents import Agent
from chalicelib.search.service import SearchHit
from chalicelib.store.attachments import StoreFile
from chalicelib.store.batches import Batch
from chalicelib.store.batches import status as batch_status
from chalicelib.store.files import FileRow
from chalicelib.store.vector_stores import VectorStore, is_expired
from chalicelib.wire import FileCounts, VectorStoreStatus


def unix(value: datetime | None) -> int | None:
    """A timestamp as integer Unix seconds (None stays None)."""
    return None if value is None else int(value.timestamp())


def now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def file_object(row: FileRow) -> dict[str, Any]:
    """A ``file`` object. ``status`` is deprecated but still required: always ``processed`` (bytes are stored at
    upload; ingestion status lives on the vector-store file)."""
    body = {"id": row.id, "object": "file", "bytes": row.bytes, "created_at": unix(row.created_at),
            "filename": row.filename, "purpose": row.purpose, "status": "processed", "status_details": None}
    if row.expires_at is not None:
        body["expires_at"] = unix(row.expires_at)
    return body


def vector_store_object(store: VectorStore, counts: FileCounts) -> dict[str, Any]:
    """A ``vector_store`` object; ``status`` is ``expired`` past ``expires_at``, ``in_progress`` while any file
    is, else ``completed``."""
    status: VectorStoreStatus
    if is_expired(store, now()):
        status = "expired"
    elif counts["in_progress"]:
        status = "in_progress"
    else:
        status = "completed"
    body = {"id": store.id, "object": "vector_store", "created_at": unix(store.created_at),
            "name": store.name if store.name is not None else "", "usage_bytes": store.usage_bytes,
            "file_counts": counts, "status": status, "expires_at": unix(store.expires_at),
            "last_active_at": unix(store.last_active_at), "metadata": store.metadata}
    if store.expires_after:
        body["expires_after"] = store.expires_after
    return body


def vector_store_details(store: VectorStore) -> dict[str, Any]:
    """Engram's ``details`` of a vector store (``include=details``): its vector ``backend``, ``chunk_count``, the
    ``embedding_model`` and ``embedding_dimension`` its chunks were embedded with, whether it is ``shared``."""
    return {"backend": store.backend, "chunk_count": store.chunk_count, "embedding_model": store.embedding_model,
            "embedding_dimension": store.embedding_dim, "shared": store.shared}


def store_file_details(row: StoreFile) -> dict[str, Any]:
    """Engram's ``details`` of a vector-store file (``include=details``): the File's ``filename``, its
    ``chunk_count`` and when its status last changed (``updated_at``, Unix seconds)."""
    return {"filename": row.filename, "chunk_count": row.chunk_count, "updated_at": unix(row.updated_at)}


def chunk_object(chunk: Any) -> dict[str, Any]:
    """``vector_store.file.chunk`` (Engram extension): one chunk of a file as it is searched — its ``index`` in the
    file, ``text``, ``token_count`` (embedder tokens), character offsets into the parsed text and pages (1-based,
    null when the format has none) (a :class:`chalicelib.store.chunks.StoredChunk`)."""
    return {"object": "vector_store.file.chunk", "index": chunk.index, "text": chunk.text,
            "token_count": chunk.token_count, "char_start": chunk.char_start, "char_end": chunk.char_end,
            "page_start": chunk.page_start, "page_end": chunk.page_end}


def store_file_object(row: StoreFile) -> dict[str, Any]:
    """A ``vector_store.file`` object; its ``id`` is the File's id."""
    return {"id": row.file_id, "object": "vector_store.file", "usage_bytes": row.usage_bytes,
            "created_at": unix(row.created_at), "vector_store_id": row.vector_store_id, "status": row.status,
            "last_error": row.last_error if row.status == "failed" else None,
            "chunking_strategy": row.chunking_strategy, "attributes": row.attributes}


def batch_object(batch: Batch, counts: FileCounts) -> dict[str, Any]:
    """A ``vector_store.files_batch`` object (note ``files_batch``: the SDK's Literal and the SPEC)."""
    return {"id": batch.id, "object": "vector_store.files_batch", "created_at": unix(batch.created_at),
            "vector_store_id": batch.vector_store_id, "status": batch_status(batch, counts), "file_counts": counts}


def cursor_page(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """A cursor list: ``first_id``/``last_id`` are the first and last objects *returned* (None when empty)."""
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": has_more}


def deleted(object_id: str, kind: str) -> dict[str, Any]:
    """A deletion acknowledgement such as ``{"id", "object": "vector_store.deleted", "deleted": true}``."""
    return {"id": object_id, "object": kind, "deleted": True}


def search_page(queries: list[str], hits: list[SearchHit], include: frozenset[str] = frozenset(), *,
                matches: list[list[tuple[int, int]]] | None = None) -> dict[str, Any]:
    """A ``vector_store.search_results.page``; scores are relevances in [0, 1] (:mod:`chalicelib.search.relevance`)
    and ``search_query`` the queries searched (rewritten when ``rewrite_query`` was honoured). Engram's ``include``
    values add to each result: ``score_details`` — ``{"vector", "keyword", "matches"}``, the evidence its score was
    made from (cosine similarity and BM25 over the query's best attainable, each in [0, 1]; null for a leg that did
    not run) and where the query's words are in its text (``matches``, one per hit: ``[start, end]`` code-point
    offsets, :func:`chalicelib.search.highlight.matches`) — and ``chunk`` — ``{"index", "char_start", "char_end",
    "page_start", "page_end"}``, where it lies in its file. Without ``include`` the page is OpenAI's, field for
    field."""
    data = []
    for position, h in enumerate(hits):
        item: dict[str, Any] = {"file_id": h.file_id, "filename": h.filename, "score": h.score,
                                "attributes": h.attributes, "content": [{"type": "text", "text": h.text}]}
        if "score_details" in include:
            spans = matches[position] if matches is not None else []
            item["score_details"] = {"vector": h.similarity, "keyword": h.keyword,
                                     "matches": [list(span) for span in spans]}
        if "chunk" in include:
            item["chunk"] = {"index": h.chunk_index, "char_start": h.char_start, "char_end": h.char_end,
                             "page_start": h.page_start, "page_end": h.page_end}
        data.append(item)
    return {"object": "vector_store.search_results.page", "search_query": queries, "data": data,
            "has_more": False, "next_page": None}


def memory_object(memory: Memory, at: datetime | None = None) -> dict[str, Any]:
    """A ``memory`` object: its text, scope, kind, scores in [0, 1], validity interval and lifecycle times (Unix
    seconds); ``status`` at ``at`` (default now): ``active``, ``superseded``, ``invalidated``, ``consolidated``,
    ``archived`` or ``expired``; ``prompt_version``: the prompts (``name@version``) whose answers wrote its text,
    null when stored as written."""
    return {"id": memory.id, "object": "memory", "memory": memory.memory, "user_id": memory.user_id,
            "agent_id": memory.agent_id, "run_id": memory.run_id, "memory_type": memory.memory_type,
            "categories": memory.categories, "metadata": memory.metadata, "confidence": round(memory.confidence, 6),
            "importance": round(memory.importance, 6), "pinned": memory.pinned, "status": memory.status(at or now()),
            "source": {"kind": memory.source_kind, "id": memory.source_id}, "hash": memory.hash,
            "valid_from": unix(memory.valid_from), "valid_to": unix(memory.valid_to),
            "superseded_by": memory.superseded_by, "invalidated_by": memory.invalidated_by,
            "verified": memory.verified, "source_type": memory.source_type,
            "consolidated_into": memory.consolidated_into,
            "access_count": memory.access_count, "last_accessed_at": unix(memory.last_accessed_at),
            "expires_at": unix(memory.expires_at), "archived_at": unix(memory.archived_at),
            "created_at": unix(memory.created_at), "updated_at": unix(memory.updated_at),
            "prompt_version": memory.prompt_version}


def memory_search_page(query: str, hits: list[Hit]) -> dict[str, Any]:
    """``memory.search_results``: the memories found, best first, each with ``score`` and ``score_details``."""
    return {"object": "memory.search_results", "search_query": query,
            "data": [{**memory_object(h.memory), "score": h.score, "score_details": h.details} for h in hits],
            "has_more": False}


def memory_add_result(result: AddResult) -> dict[str, Any]:
    """``memory.add_result``: one entry per memory the add touched (``event`` ADD, UPDATE, INVALIDATE or NOOP,
    with its ``id`` and text) and the token ``usage`` of every model call."""
    return {"object": "memory.add_result", "results": [c.result() for c in result.changes],
            "usage": result.usage_dict()}


def memory_job_object(job: AddJob) -> dict[str, Any]:
    """``memory.job``: an asynchronous add, its ``status`` and, when done, its ``results`` and ``usage``."""
    return {"id": job.id, "object": "memory.job", "status": job.status, "user_id": job.user_id,
            "agent_id": job.agent_id, "run_id": job.run_id, "results": job.results, "usage": job.usage,
            "last_error": job.last_error, "attempts": job.attempts, "created_at": unix(job.created_at),
            "completed_at": unix(job.completed_at)}


def memory_history_entry(row: HistoryRow) -> dict[str, Any]:
    """``memory.history``: one event of a memory (texts null once the memory was deleted)."""
    return {"id": row.id, "object": "memory.history", "memory_id": row.memory_id, "event": row.event,
            "old_memory": row.old_memory, "new_memory": row.new_memory, "actor": row.actor,
            "details": row.details, "created_at": unix(row.created_at)}


def memory_entity(entity: Entity) -> dict[str, Any]:
    """``memory.entity`` (Engram extension): a user, agent or run holding memories — its ``type`` and ``id``, how
    many of its memories are ``active`` and how many exist in all (every version and status), when its first was
    created and its latest changed."""
    return {"object": "memory.entity", "type": entity.kind, "id": entity.name,
            "memories": {"active": entity.active, "total": entity.total},
            "created_at": unix(entity.created_at), "updated_at": unix(entity.updated_at)}


def exchange_object(exchange: Exchange) -> dict[str, Any]:
    """``memory.exchange`` (Engram extension): one stored exchange — a completed turn with memory on, its prompt and
    answer, its scope, thread, session and the response that answered it."""
    return {"id": exchange.id, "object": "memory.exchange", "user_id": exchange.user_id,
            "agent_id": exchange.agent_id, "run_id": exchange.run_id, "thread_id": exchange.thread_id,
            "session_id": exchange.session_id, "response_id": exchange.response_id,
            "user_prompt": exchange.user_prompt, "assistant_response": exchange.assistant_response,
            "recalled_ids": list(exchange.prior_exchange_ids), "created_at": unix(exchange.created_at)}


def agent_object(agent: Agent) -> dict[str, Any]:
    """An ``agent`` profile (Engram extension)."""
    return {"id": agent.id, "object": "agent", "name": agent.name, "model": agent.model,
            "instructions": agent.instructions, "tools": agent.tools, "memory": agent.memory,
            "metadata": agent.metadata, "created_at": unix(agent.created_at), "updated_at": unix(agent.updated_at)}


def memory_audit_entry(row: AuditRow) -> dict[str, Any]:
    """``memory.audit``: one lifecycle event (ids and counts, never text)."""
    return {"id": row.id, "object": "memory.audit", "event": row.event, "entity_type": row.entity_type,
            "entity_id": row.entity_id, "user_id": row.user_id, "agent_id": row.agent_id, "run_id": row.run_id,
            "actor": row.actor, "details": row.details, "created_at": unix(row.created_at)}
