"""Engram's memories in the shapes mem0's clients return (mem0 platform API reference, docs/openapi.json of
mem0ai/mem0): memory dicts with ISO 8601 times, add results, history entries and add events.

A mem0 memory dict: ``id``, ``memory``, ``hash``, ``user_id``, ``agent_id``, ``app_id`` (always null), ``run_id``
and ``session_id`` (the same value: mem0's search names it ``run_id``, its get and get_all ``session_id``),
``metadata``, ``categories``, ``created_at``, ``updated_at``, ``expiration_date`` (``YYYY-MM-DD``, the last day it
is visible), ``replaced_by`` (the memory that superseded or contradicted it); Engram adds ``memory_type`` and
``status``; search results add ``score`` in [0, 1] (Engram's score, not mem0's).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from chalicelib.api.objects import now
from chalicelib.memory import AddJob, Entity, HistoryRow, Memory

__all__ = ["add_results", "entity_object", "event_object", "history_entry", "iso", "memory_object",
           "profile_job_object", "profile_job_state", "profile_object"]

# Engram's add events → mem0's (ADD, UPDATE, DELETE). A contradiction adds the new memory and closes the old one
# (kept, with replaced_by), as mem0's additive pipeline does; a NOOP changed nothing and is not reported.
_EVENTS = {"ADD": "ADD", "UPDATE": "UPDATE", "INVALIDATE": "ADD"}
# memory_jobs.status → mem0's event status.
_EVENT_STATUS = {"queued": "PENDING", "in_progress": "RUNNING", "completed": "SUCCEEDED", "failed": "FAILED"}


def iso(value: datetime | None) -> str | None:
    """A timestamp as ISO 8601 with its UTC offset (None stays None)."""
    return None if value is None else value.isoformat()


def _expiration_date(expires_at: datetime | None) -> str | None:
    """The last day (UTC) a memory expiring at ``expires_at`` is visible, ``YYYY-MM-DD``."""
    return None if expires_at is None else (expires_at - timedelta(microseconds=1)).date().isoformat()


def memory_object(memory: Memory, *, score: float | None = None) -> dict[str, Any]:
    """A mem0 memory dict (see the module docstring); ``score`` for search results."""
    out: dict[str, Any] = {
        "id": memory.id, "memory": memory.memory, "hash": memory.hash, "user_id": memory.user_id,
        "agent_id": memory.agent_id, "app_id": None, "run_id": memory.run_id, "session_id": memory.run_id,
        "metadata": memory.metadata, "categories": memory.categories, "memory_type": memory.memory_type,
        "status": memory.status(now()), "created_at": iso(memory.created_at), "updated_at": iso(memory.updated_at),
        "expiration_date": _expiration_date(memory.expires_at),
        "replaced_by": memory.superseded_by or memory.invalidated_by}
    if score is not None:
        out["score"] = score
    return out


def add_results(results: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """An add's native result entries (``memory.add_result.results``) as mem0's: ``{"id", "memory", "event",
    "data": {"memory"}}`` (mem0's platform nests the text in ``data``, its v1.1 format does not: both are there),
    ``previous_memory`` for an UPDATE, ``replaces`` (the contradicted memory's id) for a contradiction."""
    out = []
    for entry in results or []:
        event = _EVENTS.get(entry.get("event", ""))
        if event is None:
            continue
        item: dict[str, Any] = {"id": entry.get("id"), "memory": entry.get("memory"), "event": event,
                                "data": {"memory": entry.get("memory")}}
        if entry.get("event") == "UPDATE" and "previous_memory" in entry:
            item["previous_memory"] = entry["previous_memory"]
        if entry.get("event") == "INVALIDATE":
            item["replaces"] = entry.get("previous_id")
        out.append(item)
    return out


def history_entry(row: HistoryRow, scope: dict[str, str | None]) -> dict[str, Any]:
    """One mem0 history entry: ``id`` (a string), ``memory_id``, ``old_memory``, ``new_memory`` (null once the
    memory was deleted), ``event`` (Engram's: ADD, UPDATE, INVALIDATE, DELETE, ...), the memory's ``scope`` ids
    (null when it is gone), ``input`` (always empty: Engram does not keep the conversation), times; Engram adds
    ``actor`` and ``details``."""
    return {"id": str(row.id), "memory_id": row.memory_id, "input": [], "old_memory": row.old_memory,
            "new_memory": row.new_memory, "event": row.event, "user_id": scope.get("user_id"),
            "agent_id": scope.get("agent_id"), "run_id": scope.get("run_id"), "session_id": scope.get("run_id"),
            "categories": [], "metadata": None, "actor": row.actor, "details": row.details,
            "created_at": iso(row.created_at), "updated_at": iso(row.created_at)}


def event_object(job: AddJob) -> dict[str, Any]:
    """An asynchronous add as mem0's event: ``id``, ``event_type`` ``ADD``, ``status`` (PENDING, RUNNING,
    SUCCEEDED, FAILED), ``results`` (mem0 add results once it succeeded), ``error`` (the last error's message),
    times."""
    error = (job.last_error or {}).get("message") if job.status == "failed" else None
    return {"id": job.id, "event_type": "ADD", "status": _EVENT_STATUS[job.status],
            "results": add_results(job.results), "error": error, "created_at": iso(job.created_at),
            "updated_at": iso(job.updated_at), "completed_at": iso(job.completed_at)}


def entity_object(entity: Entity, tenant: str) -> dict[str, Any]:
    """One of mem0's ``users()`` results: ``id`` (``<type>:<name>``, unique across types), ``name``, ``type``
    (``user``, ``agent``, ``run``), ``total_memories`` (its active memories), ``owner`` and ``organization`` (the
    tenant), ``metadata`` (``{"all_memories": every version and status}``), times."""
    return {"id": f"{entity.kind}:{entity.name}", "name": entity.name, "type": entity.kind,
            "total_memories": entity.active, "owner": tenant, "organization": tenant,
            "metadata": {"all_memories": entity.total}, "created_at": iso(entity.created_at),
            "updated_at": iso(entity.updated_at)}


def profile_object(user_id: str, persona: Memory | None, *, generations: int) -> dict[str, Any]:
    """mem0's profile of a user: ``profile`` (the persona's text, or null), ``status`` (``succeeded`` or
    ``insufficient_data``: no preferences to write one from yet), ``entity_type`` ``user``, ``entity_id``,
    ``updated_at`` and ``generation_count`` (versions written)."""
    return {"profile": persona.memory if persona is not None else None,
            "status": "succeeded" if persona is not None else "insufficient_data", "entity_type": "user",
            "entity_id": user_id, "updated_at": iso(persona.updated_at) if persona is not None else None,
            "generation_count": generations}


def profile_job_state(*, done: bool) -> dict[str, Any]:
    """A profile job's state (``get_profile_job``'s ``job``): finished, one user, succeeded or skipped."""
    return {"status": "completed", "total": 1, "completed": 1, "succeeded": int(done), "failed": 0,
            "skipped": int(not done), "enumeration_complete": True}


def profile_job_object(job_id: str, user_id: str, *, done: bool) -> dict[str, Any]:
    """``generate_profile``'s answer: the job (already finished), its ``status_url`` and the user."""
    return {"job_id": job_id, "status": "completed", "status_url": f"/v2/profiles/jobs/{job_id}/",
            "operation": "trigger", "entity_type": "user", "entity_id": user_id, "entity_count_reserved": 1,
            "event_id": job_id, "replayed": False, "job": profile_job_state(done=done)}
