"""Vector stores: create, find, list, delete, and the per-dimension HNSW index their chunks need."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from chalicelib import ids
from chalicelib.errors import ConflictError, EmbeddingMismatchError, NotFoundError

# HNSW build parameters: pgvector's default m=16; ef_construction raised from its default 64 to 128 because
# benchmarks/search.py measured recall@10 0.943 at ef_search 100 with 64 (whole-cluster misses) and 1.000 with 128.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
# pgvector's HNSW indexes `vector` up to 2,000 dimensions and `halfvec` up to 4,000 (pgvector README, "HNSW").
HNSW_MAX_VECTOR_DIM = 2000
HNSW_MAX_HALFVEC_DIM = 4000


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


_COLUMNS = """id, tenant_id, name, embedding_model, embedding_dim, metadata, expires_after, expires_at,
    chunk_count, keyword_length, usage_bytes, created_at, last_active_at"""

_INSERT_TENANT = "INSERT INTO tenants (id) VALUES (%s) ON CONFLICT DO NOTHING"
_INSERT = f"""
INSERT INTO vector_stores (id, tenant_id, name, embedding_model, embedding_dim, metadata)
VALUES (%(id)s, %(tenant)s, %(name)s, %(model)s, %(dim)s, %(metadata)s)
RETURNING {_COLUMNS}"""
_GET = f"SELECT {_COLUMNS} FROM vector_stores WHERE tenant_id = %(tenant)s AND id = %(id)s"
_BY_NAME = f"SELECT {_COLUMNS} FROM vector_stores WHERE tenant_id = %(tenant)s AND name = %(name)s ORDER BY created_at"
_LIST = f"SELECT {_COLUMNS} FROM vector_stores WHERE tenant_id = %(tenant)s ORDER BY created_at, id"
_DELETE = "DELETE FROM vector_stores WHERE tenant_id = %(tenant)s AND id = %(id)s"
_TOUCH = "UPDATE vector_stores SET last_active_at = now() WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s)"


def ensure_tenant(conn: psycopg.Connection, tenant_id: str) -> None:
    """Create the tenant row if it does not exist."""
    conn.execute(_INSERT_TENANT, (tenant_id,))


def create(conn: psycopg.Connection, tenant_id: str, *, name: str | None, model: str, dim: int,
           metadata: dict[str, Any] | None = None) -> VectorStore:
    """Create a vector store bound to embedding ``model`` of ``dim`` dimensions, and its HNSW index if new."""
    ensure_tenant(conn, tenant_id)
    ensure_hnsw_index(conn, dim)
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        cur.execute(_INSERT, {"id": ids.new_id(ids.VECTOR_STORE), "tenant": tenant_id, "name": name,
                              "model": model, "dim": dim, "metadata": Jsonb(metadata or {})})
        return cur.fetchone()


def get(conn: psycopg.Connection, tenant_id: str, store_id: str) -> VectorStore:
    """The tenant's store ``store_id``.

    Raises:
        NotFoundError: no such store for this tenant.
    """
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        row = cur.execute(_GET, {"tenant": tenant_id, "id": store_id}).fetchone()
    if row is None:
        raise NotFoundError(f"No vector store found with id '{store_id}'.", param="vector_store_id")
    return row


def find(conn: psycopg.Connection, tenant_id: str, name_or_id: str) -> VectorStore | None:
    """The tenant's store whose id or name is ``name_or_id``; None if there is none.

    Raises:
        ConflictError: several stores share that name (use the id).
    """
    if name_or_id.startswith(ids.VECTOR_STORE):
        try:
            return get(conn, tenant_id, name_or_id)
        except NotFoundError:
            pass
    with conn.cursor(row_factory=class_row(VectorStore)) as cur:
        rows = cur.execute(_BY_NAME, {"tenant": tenant_id, "name": name_or_id}).fetchall()
    if len(rows) > 1:
        raise ConflictError(f"{len(rows)} vector stores are named {name_or_id!r}; use an id: "
                            + ", ".join(r.id for r in rows), param="vector_store")
    return rows[0] if rows else None


def find_or_create(conn: psycopg.Connection, tenant_id: str, name: str, *, model: str, dim: int) -> VectorStore:
    """The store named ``name`` (or with that id), created for ``model``/``dim`` if missing.

    Raises:
        EmbeddingMismatchError: the existing store uses another embedding model or dimension.
    """
    store = find(conn, tenant_id, name)
    if store is None:
        return create(conn, tenant_id, name=name, model=model, dim=dim)
    check_embedding(store, model, dim)
    return store


def check_embedding(store: VectorStore, model: str, dim: int) -> None:
    """Refuse to mix embedding models in one store.

    Raises:
        EmbeddingMismatchError: ``model``/``dim`` differ from what the store was created with.
    """
    if store.embedding_model != model or store.embedding_dim != dim:
        raise EmbeddingMismatchError(
            f"Vector store '{store.id}' holds {store.embedding_model} embeddings ({store.embedding_dim} dimensions); "
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


def touch(conn: psycopg.Connection, tenant_id: str, store_ids: list[str]) -> None:
    """Record activity (``last_active_at = now()``), which drives ``last_active_at`` expiry."""
    conn.execute(_TOUCH, {"tenant": tenant_id, "ids": store_ids})


def hnsw_index_name(dim: int) -> str:
    """Name of the partial HNSW index over chunks of ``dim`` dimensions."""
    return f"chunks_hnsw_{dim}"


def vector_cast(dim: int, *, halfvec: bool) -> sql.Composable:
    """The SQL type the ``dim``-dimensional index is built over: ``vector(dim)``, or ``halfvec(dim)`` above 2,000."""
    kind = "halfvec" if halfvec and dim > HNSW_MAX_VECTOR_DIM else "vector"
    return sql.SQL("{}({})").format(sql.SQL(kind), sql.Literal(dim))


def ensure_hnsw_index(conn: psycopg.Connection, dim: int) -> None:
    """Create ``chunks_hnsw_<dim>`` (cosine) if missing. Dimensions pgvector cannot index get none: their
    searches scan exactly. Raises nothing for such dimensions."""
    from chalicelib.store.db import capabilities

    halfvec = capabilities(conn).halfvec
    if dim > (HNSW_MAX_HALFVEC_DIM if halfvec else HNSW_MAX_VECTOR_DIM):
        return
    kind = "halfvec" if halfvec and dim > HNSW_MAX_VECTOR_DIM else "vector"
    statement = sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON chunks USING hnsw ((embedding::{cast}) {ops}) "
        "WITH (m = {m}, ef_construction = {efc}) WHERE embedding_dim = {dim}"
    ).format(
        name=sql.Identifier(hnsw_index_name(dim)),
        cast=vector_cast(dim, halfvec=halfvec),
        ops=sql.SQL(f"{kind}_cosine_ops"),
        m=sql.Literal(HNSW_M),
        efc=sql.Literal(HNSW_EF_CONSTRUCTION),
        dim=sql.Literal(dim),
    )
    conn.execute(statement)
