"""Agent memory: facts remembered across conversations, recalled before each answer, consolidated and decayed by
scheduled jobs.

This is the package's whole public face: callers outside it (the HTTP routes, the mem0 adapter, the CLI, the
Responses API, the memory queue's handler and the lifecycle jobs) import only these names
(``tests/test_structure.py`` enforces it). The use cases are :mod:`chalicelib.memory.service`'s; the values they
take and return are below; the lifecycle steps are what the scheduled jobs (:mod:`chalicelib.jobs.memory`) run.

Inside, one module per concept: :mod:`~chalicelib.memory.model` (what a memory is), :mod:`~.active` (which
memories count), :mod:`~.store` (its SQL), :mod:`~.llm` (which model memory asks), :mod:`~.write` (adding),
:mod:`~.add_jobs` (asynchronous adds), :mod:`~.recall` and :mod:`~.temporal` (searching), :mod:`~.exchanges`
(conversation turns), :mod:`~.manage` (manual changes), :mod:`~.documents` (files as memories), and the lifecycle:
:mod:`~.consolidation`, :mod:`~.archive`, :mod:`~.expiry`, :mod:`~.episodes`, :mod:`~.persona`, :mod:`~.audit`.
"""

from chalicelib.memory.add_jobs import AddJob, AddJobMessage
from chalicelib.memory.add_jobs import open_jobs as open_add_jobs
from chalicelib.memory.archive import archive_stale, enforce_quota
from chalicelib.memory.audit import AuditRow
from chalicelib.memory.audit import Event as AuditEvent
from chalicelib.memory.consolidation import ScopeKey, consolidate_scope
from chalicelib.memory.consolidation import scopes_after as consolidation_scopes
from chalicelib.memory.episodes import episodize, instancize
from chalicelib.memory.exchanges import SIMILARITY_THRESHOLD as EXCHANGE_SIMILARITY
from chalicelib.memory.exchanges import Exchange
from chalicelib.memory.expiry import sweep as sweep_expired
from chalicelib.memory.llm import optional_backend as lifecycle_model
from chalicelib.memory.manage import FEEDBACK_VALUES, MemoryUpdate
from chalicelib.memory.model import EVENTS, MEMORY_TYPES, Memory, MemoryScope, MemoryType
from chalicelib.memory.persona import refresh as refresh_personas
from chalicelib.memory.recall import DEFAULT_STRATEGY, STRATEGIES, Hit, Query, Signals, Strategy
from chalicelib.memory.service import (
    ENTITY_KINDS,
    Added,
    Context,
    Idempotency,
    Recalled,
    Reindexed,
    add,
    add_document,
    audit_page,
    context,
    count,
    delete,
    delete_entity,
    delete_exchange,
    delete_many,
    entities,
    exchange,
    exchanges_page,
    feedback,
    generate_profile,
    get,
    give_up_add_job,
    handle_add_job,
    history,
    job,
    list_page,
    model_name,
    profile,
    purge,
    recall_context,
    reindex,
    remember,
    restore,
    search,
    stats,
    thread_of,
    update,
    update_many,
)
from chalicelib.memory.store import Edit, Entity, HistoryRow
from chalicelib.memory.write import AddRequest, AddResult, InputMessage

__all__ = [
    # the service
    "Added",
    "Context",
    "Idempotency",
    "Recalled",
    "Reindexed",
    "add",
    "add_document",
    "audit_page",
    "context",
    "count",
    "delete",
    "delete_entity",
    "delete_exchange",
    "delete_many",
    "entities",
    "exchange",
    "exchanges_page",
    "feedback",
    "generate_profile",
    "get",
    "give_up_add_job",
    "handle_add_job",
    "history",
    "job",
    "list_page",
    "model_name",
    "profile",
    "purge",
    "recall_context",
    "reindex",
    "remember",
    "restore",
    "search",
    "stats",
    "thread_of",
    "update",
    "update_many",
    # values
    "DEFAULT_STRATEGY",
    "ENTITY_KINDS",
    "EVENTS",
    "EXCHANGE_SIMILARITY",
    "Exchange",
    "FEEDBACK_VALUES",
    "MEMORY_TYPES",
    "STRATEGIES",
    "AddJob",
    "AddJobMessage",
    "AddRequest",
    "AddResult",
    "AuditEvent",
    "AuditRow",
    "Edit",
    "Entity",
    "HistoryRow",
    "Hit",
    "InputMessage",
    "Memory",
    "MemoryScope",
    "MemoryType",
    "MemoryUpdate",
    "Query",
    "Signals",
    "Strategy",
    # the lifecycle (scheduled jobs) and the local stack's restart
    "ScopeKey",
    "archive_stale",
    "consolidate_scope",
    "consolidation_scopes",
    "enforce_quota",
    "episodize",
    "instancize",
    "lifecycle_model",
    "open_add_jobs",
    "refresh_personas",
    "sweep_expired",
]
