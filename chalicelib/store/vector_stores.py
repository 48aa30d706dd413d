"""Vector stores: create, find, list, delete, share, and the per-dimension HNSW index their chunks need.

Sharing (migrations/0014_shared_stores.sql): an operator marks a store ``shared``; every tenant may then read it —
retrieve it by id and search it — while only its owner may change it, list or read its files. :func:`get` is the
owner's view (a shared store of another tenant is refused with 403: it is visible, so "not found" would be
untrue); ``get(..., shared=True)`` is the reader's view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib import ids
from chalicelib.config import DEFAULT_VECTOR_BACKEND
from chalicelib.errors import (
    ConflictError,
    EmbeddingMismatchError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
)
from chalicelib.store.db import one
from chalicelib.store.paging import Page, keyset, trim
from chalicelib.wire import FileCounts

# HNSW build parameters: pgvector's default m=16; ef_construction raised from its default 64 to 128 because
# benchmarks/search.py measured recall@10 0.943 at ef_search 100 with 64 (whole-cluster misses) and 1.000 with 128.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
# pgvector's HNSW indexes `vector` up to 2,000 dimensions and `halfvec` up to 4,000 (pgvector README, "HNSW").
HNSW_MAX_VECTOR_DIM = 2000
HNSW_MAX_HALFVEC_DIM = 4000
# The error code of a write (or file read) on a store another tenant shared: readable, not writable.
READ_ONLY_CODE = "vector_store_read_only"


@dataclass(frozen=True, slots=True)
class VectorStore:
    """A row of ``vector_stores``; times are timezone-aware datetimes, sizes in bytes and chunks."""

    id: str
    tenant_id: str
    name: str | None
    embedding_model: str
    embedding_dim: int
    metadata: dict[str, Any]
    expires_after: dict[str, Any] | None
    expires_at: datetime | None
    chunk_count: int
    keyword_length: int
    usage_bytes: int
    created_at: datetime
    last_active_at: datetime
    shared: bool = False
    shared_at: datetime | None = None
    shared_by: str | None = None
    backend: str = DEFAULT_VECTOR_BACKEND  # where its candidates live (chalicelib.config.VECTOR_BACKENDS)


_COLUMNS = """id, tenant_id, name, embedding_model, embedding_dim, metadata, expires_after, expires_at,
    chunk_count, keyword_length, usage_bytes, created_at, last_active_at, shared, shared_at, shared_by, backend"""

_INSERT_TENANT = "INSERT INTO tenants (id) VALUES (%s) ON CONFLICT DO NOTHING"
# Whether a backend's candidates are Postgres' own indexes (the one definition, migration 0026).
_IN_POSTGRES = "SELECT engram_backend_in_postgres(%(backend)s)"
_INSERT = f"""
INSERT INTO vector_stores (id, tenant_id, name, embedding_model, embedding_dim, metadata, expires_after, expires_at,
                           backend)
VALUES (%(id)s, %(tenant)s, %(name)s, %(model)s, %(dim)s, %(metadata)s, %(expires_after)s,
        now() + make_interval(days => (%(expires_after)s::jsonb ->> 'days')::int), %(backend)s)
RETURNING {_COLUMNS}"""
_PAGE = f"""SELECT {_COLUMNS} FROM vector_stores WHERE tenant_id = %(tenant)s AND {{keyset}}
ORDER BY {{order}} LIMIT %(page_limit)s"""
_UPDATE = f"""
UPDATE vector_stores SET
    name = CASE WHEN %(set_name)s THEN %(name)s ELSE name END,
    metadata = CASE WHEN %(set_metadata)s THEN %(metadata)s ELSE metadata END,
    expires_after = CASE WHEN %(set_expires)s THEN %(expires_after)s ELSE expires_after END,
    last_active_at = now(),
    expires_at = now() + make_interval(days => (
        (CASE WHEN %(set_expires)s THEN %(expires_after)s ELSE expires_after END) ->> 'days')::int)
WHERE tenant_id = %(tenant)s AND id = %(id)s
RETURNING {_COLUMNS}"""
_FILE_COUNTS = """
SELECT vector_store_id,
       count(*) FILTER (WHERE status = 'in_progress'), count(*) FILTER (WHERE status = 'completed'),
       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'cancelled'), count(*)
FROM vector_store_files WHERE tenant_id = %(tenant)s AND vector_store_id = ANY(%(ids)s) GROUP BY vector_store_id"""
_EXPIRED = """SELECT tenant_id, id FROM vector_stores
WHERE expires_at < now() - make_interval(secs => %(retention)s)
  AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s) LIMIT %(limit)s"""
# The caller's store, or another tenant's shared one (the caller decides what it may do with the latter).
_GET = f"SELECT {_COLUMNS} FROM vector_stores WHERE id = %(id)s AND (tenant_id = %(tenant)s OR shared)"
_SHARE = f"""UPDATE vector_stores SET shared = %(shared)s,
    shared_at = CASE WHEN %(shared)s THEN coalesce(shared_at, now()) END,
    shared_by = CASE WHEN %(shared)s THEN %(by)s END
WHERE id = %(id)s RETURNING {_COLUMNS}"""
_LIST_SHARED = f"SELECT {_COLUMNS} FROM vector_stores WHERE shared ORDER BY shared_at, id"
_SHARED_FILE_COUNTS = """
SELECT vector_store_id,
       count(*) FILTER (WHERE status = 'in_progress'), count(*) FILTER (WHERE status = 'completed'),
       count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'cancelled'), count(*)
FROM shared_store_files WHERE vector_store_id = ANY(%(ids)s) GROUP BY vector_store_id"""
_BY_NAME = f"SELECT {_COLUMNS} FROM vector_stores WHERE tenant_id = %(tenant)s AND name = %(name)s ORDER BY created_at"
_LIST = f"SELECT {_COLUMNS} FROM vector_stores WHERE tenant_id = %(tenant)s ORDER BY created_at, id"
_DELETE = "DELETE FROM vector_stores WHERE tenant_id = %(tenant)s AND id = %(id)s"
_INDEX_EXISTS = "SELECT 1 FROM pg_class WHERE relname = %s AND relkind = 'i'"
# Activity is recorded at most once a minute per store: expiry counts in days, and a write (WAL flush, dead row)
# on every search cost 0.4–7 ms of search latency in benchmarks/api.py.
TOUCH_GRANULARITY_S = 60
_TOUCH = f"""UPDATE vector_stores SET last_active_at = now(),
    expires_at = now() + make_interval(days => (expires_after ->> 'days')::int)
WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s)
  AND last_active_at < now() - make_interval(secs => {TOUCH_GRANULARITY_S})"""


def ensure_tenant(conn: psycopg.Connection, tenant_id: str) -> None:
    """Create the tenant row if it does not exist."""
    conn.execute(_INSERT_TENANT, (tenant_id,))


def create(conn: psycopg.Connection, tenant_id: str, *, name: str | None, model: str, dim: int,
           metadata: dict[str, Any] | None = None, expires_after: dict[str, Any] | None = None,
           backend: str = DEFAULT_VECTOR_BACKEND) -> VectorStore:
    """Create a vector store bound to embedding ``model`` of ``dim`` dimensions whose candidates live in
    ``backend`` (a name of :data:`chalicelib.config.VECTOR_BACKENDS`; for the backend in Postgres, the dimension's
    HNSW index is created if new). ``expires_after`` is OpenAI's ``{"anchor": "last_active_at", "days": N}``:
    ``expires_at`` is N days after the last activity."""
    ensure_tenant(conn, tenant_id)
    if one(conn.execute(_IN_POSTGRES, {"backend": backend}))[0]:
        ensure_hnsw_index(conn, dim)
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        return one(cur.execute(_INSERT, {"id": ids.new_id(ids.VECTOR_STORE), "tenant": tenant_id, "name": name,
                                         "model": model, "dim": dim, "metadata": Jsonb(metadata or {}),
                                         "expires_after": Jsonb(expires_after) if expires_after else None,
                                         "backend": backend}))


def list_page(conn: psycopg.Connection, tenant_id: str, page: Page) -> tuple[list[VectorStore], bool]:
    """One page of the tenant's stores: ``(rows, has_more)``."""
    where, order, params = keyset(page, "id")
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        rows = cur.execute(sql.SQL(_PAGE).format(keyset=where, order=order),
                           {"tenant": tenant_id, **params}).fetchall()
    return trim(page, rows)


_UNSET: Any = object()


def update(conn: psycopg.Connection, tenant_id: str, store_id: str, *, name: Any = _UNSET, metadata: Any = _UNSET,
           expires_after: Any = _UNSET) -> VectorStore:
    """Modify a store: each argument given (None allowed: clears it) replaces the stored value; counts as activity.

    Raises:
        NotFoundError: no such store for this tenant.
        PermissionDeniedError: (403) a store another tenant shared (read-only).
    """
    params = {"tenant": tenant_id, "id": store_id,
              "set_name": name is not _UNSET, "name": None if name is _UNSET else name,
              "set_metadata": metadata is not _UNSET,
              "metadata": Jsonb({} if metadata in (_UNSET, None) else metadata),
              "set_expires": expires_after is not _UNSET,
              "expires_after": Jsonb(expires_after) if expires_after not in (_UNSET, None) else None}
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        row = cur.execute(_UPDATE, params).fetchone()
    if row is None:
        get(conn, tenant_id, store_id)  # raises: not found, or another tenant's shared store (read-only)
        raise NotFoundError(f"No vector store found with id '{store_id}'.", param="vector_store_id")
    return row


def file_counts(conn: psycopg.Connection, tenant_id: str, store_ids: list[str]) -> dict[str, FileCounts]:
    """Per store, the number of attached files in each status (computed from the rows, so always consistent)."""
    return _counts(store_ids, conn.execute(_FILE_COUNTS, {"tenant": tenant_id, "ids": store_ids}).fetchall())


def shared_file_counts(conn: psycopg.Connection, store_ids: list[str]) -> dict[str, FileCounts]:
    """:func:`file_counts` of shared stores, for any tenant (through the view ``shared_store_files``, which shows
    the owner's attachments of shared stores only); a store that is not shared counts no files."""
    return _counts(store_ids, conn.execute(_SHARED_FILE_COUNTS, {"ids": store_ids}).fetchall())


def _counts(store_ids: list[str], rows: list[tuple[Any, ...]]) -> dict[str, FileCounts]:
    counts: dict[str, FileCounts] = {
        sid: {"in_progress": 0, "completed": 0, "failed": 0, "cancelled": 0, "total": 0} for sid in store_ids}
    for sid, in_progress, completed, failed, cancelled, total in rows:
        counts[sid] = {"in_progress": in_progress, "completed": completed, "failed": failed,
                       "cancelled": cancelled, "total": total}
    return counts


def is_expired(store: VectorStore, now: datetime) -> bool:
    """Whether ``store`` passed its ``expires_at`` (OpenAI then reports status ``expired``)."""
    return store.expires_at is not None and store.expires_at <= now


def require_active(store: VectorStore, now: datetime) -> None:
    """Refuse to search or add files to an expired store.

    Raises:
        InvalidRequestError: (400, code ``vector_store_expired``) the store has expired.
    """
    if is_expired(store, now):
        raise InvalidRequestError(f"Vector store '{store.id}' has expired.", param="vector_store_id",
                                  code="vector_store_expired")


def sweep_expired(conn: psycopg.Connection, *, retention_s: float, tenant_id: str | None = None,
                  limit: int = 1000) -> int:
    """Delete up to ``limit`` stores that expired more than ``retention_s`` seconds ago (one tenant's, or every
    tenant's as the owner), with their chunks and attachments; returns how many were deleted."""
    rows = conn.execute(_EXPIRED, {"retention": retention_s, "tenant": tenant_id, "limit": limit}).fetchall()
    return sum(delete(conn, tenant, store_id) for tenant, store_id in rows)


def get(conn: psycopg.Connection, tenant_id: str, store_id: str, *, shared: bool = False) -> VectorStore:
    """The tenant's store ``store_id``; with ``shared=True`` also a store another tenant shared (read it, search it,
    never change it: check ``store.tenant_id`` before writing).

    Raises:
        NotFoundError: no such store for this tenant (another tenant's unshared store is "not found" too).
        PermissionDeniedError: (403, code :data:`READ_ONLY_CODE`) without ``shared``, a store another tenant
            shared: the caller can see it but may not change it or read its files.
    """
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        row = cur.execute(_GET, {"tenant": tenant_id, "id": store_id}).fetchone()
    if row is None:
        raise NotFoundError(f"No vector store found with id '{store_id}'.", param="vector_store_id")
    if row.tenant_id != tenant_id and not shared:
        raise read_only(store_id)
    return row


def read_only(store_id: str) -> PermissionDeniedError:
    """The error for a write on (or a file read of) a store another tenant shared."""
    return PermissionDeniedError(f"Vector store '{store_id}' is shared read-only: you can retrieve and search it; "
                                 "only its owner can change it or list and read its files.",
                                 param="vector_store_id", code=READ_ONLY_CODE)


def set_shared(conn: psycopg.Connection, store_id: str, shared: bool, *, by: str | None = None) -> VectorStore:
    """Share ``store_id`` with every tenant (read-only), or stop sharing it; ``by`` names who did (kept while
    shared). Sharing an already shared store keeps its ``shared_at``. Operators only: run it on the owner's
    connection (:func:`chalicelib.store.db.connect`); the API's role is refused by a trigger.

    Raises:
        NotFoundError: no store has that id (in any tenant).
        PermissionDeniedError: ``conn`` acts as the API's role (the trigger of migrations/0014 refuses it).
    """
    try:
        with conn.transaction(), conn.cursor(row_factory=class_row(VectorStore)) as cur:
            row = cur.execute(_SHARE, {"id": store_id, "shared": shared, "by": by}).fetchone()
    except psycopg.errors.InsufficientPrivilege as exc:
        raise PermissionDeniedError("Only an operator (the database owner, e.g. `engram stores share`) can share or "
                                    "unshare a vector store.", param="vector_store_id") from exc
    if row is None:
        raise NotFoundError(f"No vector store found with id '{store_id}'.", param="vector_store_id")
    return row


def list_shared(conn: psycopg.Connection) -> list[VectorStore]:
    """Every shared store (any tenant's), in the order they were shared."""
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        return cur.execute(_LIST_SHARED).fetchall()


def find(conn: psycopg.Connection, tenant_id: str, name_or_id: str, *, shared: bool = False) -> VectorStore | None:
    """The tenant's store whose id or name is ``name_or_id``; None if there is none. With ``shared=True`` an id may
    also name a store another tenant shared (names are looked up in the tenant's own stores only).

    Raises:
        ConflictError: several stores share that name (use the id).
        PermissionDeniedError: without ``shared``, the id of a store another tenant shared (read-only).
    """
    if name_or_id.startswith(ids.VECTOR_STORE):
        try:
            return get(conn, tenant_id, name_or_id, shared=shared)
        except NotFoundError:
            pass
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        rows = cur.execute(_BY_NAME, {"tenant": tenant_id, "name": name_or_id}).fetchall()
    if len(rows) > 1:
        raise ConflictError(f"{len(rows)} vector stores are named {name_or_id!r}; use an id: "
                            + ", ".join(r.id for r in rows), param="vector_store")
    return rows[0] if rows else None


def find_or_create(conn: psycopg.Connection, tenant_id: str, name: str, *, model: str, dim: int,
                   backend: str = "pgvector") -> VectorStore:
    """The store named ``name`` (or with that id), created for ``model``/``dim`` in ``backend`` if missing.

    Raises:
        EmbeddingMismatchError: the existing store uses another embedding model or dimension.
        PermissionDeniedError: ``name`` is the id of a store another tenant shared (read-only).
    """
    store = find(conn, tenant_id, name)
    if store is None:
        return create(conn, tenant_id, name=name, model=model, dim=dim, backend=backend)
    check_embedding(store, model, dim)
    return store


def check_embedding(store: VectorStore, model: str, dim: int) -> None:
    """Refuse to mix embedding models in one store.

    Raises:
        EmbeddingMismatchError: ``model``/``dim`` differ from what the store was created with.
    """
    check_model(store.id, store.embedding_model, store.embedding_dim, model, dim)


def check_model(store_id: str, store_model: str, store_dim: int, model: str, dim: int) -> None:
    """:func:`check_embedding` for a store known by its id, model and dimensions.

    Raises:
        EmbeddingMismatchError: ``model``/``dim`` differ from ``store_model``/``store_dim``.
    """
    if store_model != model or store_dim != dim:
        raise EmbeddingMismatchError(
            f"Vector store '{store_id}' holds {store_model} embeddings ({store_dim} dimensions); "
            f"the configured embedder is {model} ({dim} dimensions). Mixing models in one store would make its "
            "search meaningless: use the store's model or create a new store.",
            param="vector_store_id",
        )


def list_all(conn: psycopg.Connection, tenant_id: str) -> list[VectorStore]:
    """All of the tenant's stores, oldest first."""
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        return cur.execute(_LIST, {"tenant": tenant_id}).fetchall()


def delete(conn: psycopg.Connection, tenant_id: str, store_id: str) -> bool:
    """Delete the store with its files' attachments, chunks and statistics; False if it did not exist."""
    return conn.execute(_DELETE, {"tenant": tenant_id, "id": store_id}).rowcount > 0


def touch(conn: psycopg.Connection, tenant_id: str, stores: Sequence[VectorStore]) -> None:
    """Record activity (``last_active_at = now()``), which drives ``last_active_at`` expiry; a store touched within
    the last :data:`TOUCH_GRANULARITY_S` seconds is left as is.

    A store whose loaded ``last_active_at`` is already that recent is left out without a round trip (a search then
    writes nothing): ``last_active_at`` only grows, so the stored value is at least as recent and the UPDATE's own
    condition would leave the row too (up to the skew between this clock and the database's, seconds)."""
    cutoff = datetime.now(UTC) - timedelta(seconds=TOUCH_GRANULARITY_S)
    ids = [s.id for s in stores if s.last_active_at < cutoff]
    if ids:
        conn.execute(_TOUCH, {"tenant": tenant_id, "ids": ids})


def hnsw_index_name(dim: int) -> str:
    """Name of the partial HNSW index over chunks of ``dim`` dimensions."""
    return f"chunks_hnsw_{dim}"


def vector_cast(dim: int, *, halfvec: bool) -> sql.Composable:
    """The SQL type an HNSW index of ``dim`` dimensions is built over: ``halfvec(dim)`` when ``halfvec``, else
    ``vector(dim)``. A search's ORDER BY must use the same cast for the planner to use the index."""
    return sql.SQL("{}({})").format(sql.SQL("halfvec" if halfvec else "vector"), sql.Literal(dim))


@dataclass(frozen=True, slots=True)
class HnswIndex:
    """The HNSW index of one dimension as a search must address it.

    Attributes:
        kind: the type it is built over (``"halfvec"`` or ``"vector"``), None when there is none.
        iterative_scan: pgvector ≥ 0.8 (``hnsw.iterative_scan``).
        indexed_rows: chunks of that dimension in the vector stores the caller can read (their ``chunk_count``s):
            what the index holds, as far as sizing ``ef_search`` and choosing exact vs HNSW goes.
    """

    kind: str | None
    iterative_scan: bool
    indexed_rows: int = 0

    @property
    def halfvec(self) -> bool:
        return self.kind == "halfvec"


_HNSW_INDEX = """SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector'),
       (SELECT o.opcname FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
        JOIN pg_opclass o ON o.oid = i.indclass[0] WHERE c.relname = %(name)s),
       (SELECT coalesce(sum(chunk_count), 0) FROM vector_stores WHERE embedding_dim = %(dim)s)"""


def hnsw_index(conn: psycopg.Connection, dim: int) -> HnswIndex:
    """What the index of ``dim`` dimensions is built over, whether pgvector scans iteratively, and how many rows it
    holds (one query).

    Indexes are built over ``halfvec`` where pgvector has it (≥ 0.7; migrations/0011 converted older ones), but a
    server whose pgvector was upgraded after the index was built still holds a ``vector`` one: the index's operator
    class decides, not the version."""
    version, opclass, rows = one(conn.execute(_HNSW_INDEX, {"name": hnsw_index_name(dim), "dim": dim}))
    parsed = tuple(int(part) for part in version.split(".")) if version else (0,)
    kind = None if opclass is None else ("halfvec" if opclass.startswith("halfvec") else "vector")
    return HnswIndex(kind=kind, iterative_scan=parsed >= (0, 8, 0), indexed_rows=int(rows))


def ensure_hnsw_index(conn: psycopg.Connection, dim: int) -> None:
    """Create ``chunks_hnsw_<dim>`` (cosine) if missing, over ``halfvec`` where pgvector has it (≥ 0.7: half the
    size of a ``vector`` graph at the same recall — benchmarks/search.py ``--index-compare``), else ``vector``.
    Dimensions pgvector cannot index get none: their searches scan exactly. Raises nothing for such dimensions."""
    from chalicelib.store.db import capabilities

    halfvec = capabilities(conn).halfvec
    if dim > (HNSW_MAX_HALFVEC_DIM if halfvec else HNSW_MAX_VECTOR_DIM):
        return
    kind = "halfvec" if halfvec else "vector"
    # migrations/0002_api.sql: a SECURITY DEFINER function, so the API's role (not the table owner) can call it.
    if conn.execute(_INDEX_EXISTS, (hnsw_index_name(dim),)).fetchone() is None:
        try:
            with conn.transaction():  # a savepoint, so losing the race below leaves the caller's transaction usable
                conn.execute("SELECT engram_ensure_hnsw_index(%s, %s, %s, %s)",
                             (dim, kind, HNSW_M, HNSW_EF_CONSTRUCTION))
        except psycopg.errors.UniqueViolation:
            pass  # a concurrent request created it first (CREATE INDEX IF NOT EXISTS races on pg_class)
