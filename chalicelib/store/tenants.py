"""A tenant's own settings (the ``tenants`` row): its memory defaults for responses (migration 0015), its limits
(migration 0016) and whether its drop folder is on (migration 0017). Tenants are created on first use
(:func:`chalicelib.store.vector_stores.ensure_tenant`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from chalicelib.config import ENV_MAX_FILE_BYTES
from chalicelib.errors import InvalidRequestError

__all__ = ["DEFAULT_LIMITS", "TenantLimits", "check_store_capacity", "drop_folder_enabled", "knowledge_usage", "limits",
           "max_file_bytes", "memory_defaults", "raise_hint", "set_drop_folder", "set_limits", "set_memory_defaults"]

_GET = "SELECT memory_defaults FROM tenants WHERE id = %s"
_GET_LIMITS = "SELECT limits FROM tenants WHERE id = %s"
_SET_LIMITS = """INSERT INTO tenants (id, limits) VALUES (%(id)s, %(value)s)
ON CONFLICT (id) DO UPDATE SET limits = excluded.limits"""
_SET = """INSERT INTO tenants (id, memory_defaults) VALUES (%(id)s, %(value)s)
ON CONFLICT (id) DO UPDATE SET memory_defaults = excluded.memory_defaults"""
_GET_DROP_FOLDER = "SELECT drop_folder FROM tenants WHERE id = %s"
_SET_DROP_FOLDER = """INSERT INTO tenants (id, drop_folder) VALUES (%(id)s, %(value)s)
ON CONFLICT (id) DO UPDATE SET drop_folder = excluded.drop_folder"""


def memory_defaults(conn: psycopg.Connection, tenant_id: str) -> dict[str, Any] | None:
    """The tenant's memory defaults (``{"recall", "remember", "top_k", ...}``), or None: memory is off unless a
    request or an agent turns it on."""
    row = conn.execute(_GET, (tenant_id,)).fetchone()
    return row[0] if row else None


def set_memory_defaults(conn: psycopg.Connection, tenant_id: str, value: dict[str, Any] | None) -> None:
    """Replace the tenant's memory defaults (None clears them); creates the tenant if new."""
    conn.execute(_SET, {"id": tenant_id, "value": Jsonb(value) if value is not None else None})


def drop_folder_enabled(conn: psycopg.Connection, tenant_id: str) -> bool:
    """Whether the drop bucket may write into the tenant's stores (on unless turned off; an unknown tenant: on)."""
    row = conn.execute(_GET_DROP_FOLDER, (tenant_id,)).fetchone()
    return bool(row[0]) if row else True


def set_drop_folder(conn: psycopg.Connection, tenant_id: str, enabled: bool) -> None:
    """Turn the tenant's drop folder on or off (off: every S3 event under ``<tenant>/`` is refused,
    :mod:`chalicelib.events.drop`); creates the tenant if new."""
    conn.execute(_SET_DROP_FOLDER, {"id": tenant_id, "value": enabled})


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """A tenant's limits (seed 000, "Data Retention"; seed 002 §1 for the working-memory TTL). Knowledge:
    ``max_storage_bytes`` over all its vector stores, ``max_files_per_store``, ``max_file_size_bytes`` — by default
    OpenAI's own (API reference: a file "can be up to 512 MB", "each project can store up to 2.5 TB of files in
    total", a vector store created since November 2025 holds up to 100,000,000 files), the service-wide
    ``ENGRAM_MAX_FILE_BYTES`` applying too. Memory: ``max_entries`` active memories (beyond it the lowest-value
    ones are archived, never deleted), ``auto_archive_days`` without access before a memory is archived,
    ``working_ttl_s`` seconds a working memory lives unless its write says otherwise, ``expired_retention_days``
    an expired memory is kept before deletion. An operator changes them with ``engram tenants limits TENANT --set
    NAME=VALUE`` (:func:`raise_hint`)."""

    max_storage_bytes: int = 2_500 * 1000**3
    max_files_per_store: int = 100_000_000
    max_file_size_bytes: int = 512 * 1024**2
    max_entries: int = 10_000
    auto_archive_days: int = 180
    working_ttl_s: int = 24 * 3600
    expired_retention_days: int = 30

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The limits' names."""
        return tuple(f.name for f in dataclasses.fields(cls))


def limits(conn: psycopg.Connection, tenant_id: str) -> TenantLimits:
    """The tenant's limits: its own values over the defaults."""
    row = conn.execute(_GET_LIMITS, (tenant_id,)).fetchone()
    stored = (row[0] if row else None) or {}
    return TenantLimits(**{k: v for k, v in stored.items() if k in TenantLimits.names()})


def set_limits(conn: psycopg.Connection, tenant_id: str, changes: dict[str, int | None]) -> TenantLimits:
    """Change some of the tenant's limits (None restores a default); creates the tenant if new.

    Raises:
        InvalidRequestError: an unknown limit or a value that is not a positive integer.
    """
    for name, value in changes.items():
        if name not in TenantLimits.names():
            raise InvalidRequestError(f"Unknown limit {name!r}; limits: {', '.join(TenantLimits.names())}.",
                                      param=name, code="invalid_value")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise InvalidRequestError(f"Limit {name!r} must be a positive integer.", param=name,
                                      code="invalid_value")
    row = conn.execute(_GET_LIMITS, (tenant_id,)).fetchone()
    stored = dict((row[0] if row else None) or {})
    for name, value in changes.items():
        if value is None:
            stored.pop(name, None)
        else:
            stored[name] = value
    conn.execute(_SET_LIMITS, {"id": tenant_id, "value": Jsonb(stored)})
    return TenantLimits(**stored)


DEFAULT_LIMITS = TenantLimits()
_USAGE = """SELECT coalesce(sum(usage_bytes), 0) FROM vector_stores WHERE tenant_id = %s"""
_STORE_FILES = """SELECT count(*) FROM vector_store_files WHERE tenant_id = %(tenant)s AND vector_store_id = %(store)s
AND file_id <> ALL(%(files)s)"""


def raise_hint(tenant_id: str, name: str) -> str:
    """How an operator raises the tenant's limit ``name`` (a sentence for error messages)."""
    return f"An operator raises it with `engram tenants limits {tenant_id} --set {name}=<value>`."


def max_file_bytes(conn: psycopg.Connection, tenant_id: str, service_max: int) -> tuple[int, str]:
    """The largest file the tenant may upload: ``(bytes, what sets it)`` — the smaller of the service's
    ``ENGRAM_MAX_FILE_BYTES`` and the tenant's ``max_file_size_bytes``; "what sets it" names the setting and how
    to raise it."""
    tenant_max = limits(conn, tenant_id).max_file_size_bytes
    if tenant_max < service_max:
        return tenant_max, (f"the tenant's max_file_size_bytes limit ({raise_hint(tenant_id, 'max_file_size_bytes')}"
                            ")")
    return service_max, f"the service's limit ({ENV_MAX_FILE_BYTES}, OpenAI's 512 MB by default)"


def check_store_capacity(conn: psycopg.Connection, tenant_id: str, store_id: str, file_ids: list[str],
                         new_bytes: int, *, param: str) -> None:
    """Refuse attaching ``file_ids`` (``new_bytes`` together) to a store when the store would hold more than the
    tenant's ``max_files_per_store`` files, or the tenant's vector stores more than ``max_storage_bytes``
    (files already attached there are not counted twice).

    Raises:
        InvalidRequestError: (400, code ``too_many_files`` or ``storage_limit_exceeded``) naming the limit.
    """
    current = limits(conn, tenant_id)
    row = conn.execute(_STORE_FILES, {"tenant": tenant_id, "store": store_id, "files": file_ids}).fetchone()
    files = int(row[0]) if row else 0
    if files + len(file_ids) > current.max_files_per_store:
        raise InvalidRequestError(
            f"The vector store would hold {files + len(file_ids):,} files; the tenant's max_files_per_store limit "
            f"is {current.max_files_per_store:,}. {raise_hint(tenant_id, 'max_files_per_store')}", param=param,
            code="too_many_files")
    row = conn.execute(_USAGE, (tenant_id,)).fetchone()
    used = int(row[0]) if row else 0
    if used + new_bytes > current.max_storage_bytes:
        raise InvalidRequestError(
            f"The tenant's vector stores would use {used + new_bytes:,} bytes; its max_storage_bytes limit is "
            f"{current.max_storage_bytes:,}. {raise_hint(tenant_id, 'max_storage_bytes')}", param=param,
            code="storage_limit_exceeded")


# What the tenant's knowledge limits are measured against: its stores, their bytes (max_storage_bytes), its files,
# the most files one store holds (max_files_per_store) and its largest file (max_file_size_bytes).
_KNOWLEDGE_USAGE = """
SELECT (SELECT count(*) FROM vector_stores WHERE tenant_id = %(tenant)s),
       (SELECT coalesce(sum(usage_bytes), 0) FROM vector_stores WHERE tenant_id = %(tenant)s),
       (SELECT count(*) FROM files WHERE tenant_id = %(tenant)s),
       (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM vector_store_files WHERE tenant_id = %(tenant)s
                                         GROUP BY vector_store_id) AS per_store),
       (SELECT coalesce(max(bytes), 0) FROM files WHERE tenant_id = %(tenant)s)"""


def knowledge_usage(conn: psycopg.Connection, tenant_id: str) -> dict[str, int]:
    """What the tenant uses of its knowledge limits: ``{"vector_stores", "storage_bytes" (its stores'
    usage_bytes), "files", "max_store_files" (the fullest store's files), "max_file_bytes" (its largest file)}``."""
    row = conn.execute(_KNOWLEDGE_USAGE, {"tenant": tenant_id}).fetchone()
    names = ("vector_stores", "storage_bytes", "files", "max_store_files", "max_file_bytes")
    return {name: int(value) for name, value in zip(names, row or (0,) * len(names))}
