"""Postgres + pgvector storage.

The package's rule: **store = shared plumbing plus the knowledge tables.** Shared plumbing is what every feature
uses: :mod:`db` (connections, pools, tenant connections, :func:`db.one`), :mod:`migrate` (the numbered SQL
migrations), :mod:`embedded` (the embedded Postgres), :mod:`dsn` (the deployed database URL), :mod:`paging`
(keyset pagination), :mod:`blobs` (S3 or local bytes) and :mod:`blob_refs` (which blobs rows still name). The
knowledge tables get one module per table group: :mod:`api_keys`, :mod:`files`, :mod:`uploads`,
:mod:`vector_stores`, :mod:`attachments`, :mod:`batches`, :mod:`chunks`, :mod:`embedding_cache`, and the
ingestion pipeline's :mod:`ingest_jobs`, :mod:`staged_chunks`, :mod:`drop_objects` and :mod:`drop_errors`.
Feature-specific SQL lives in its feature's package instead (:mod:`chalicelib.responses.store`,
:mod:`chalicelib.jobs.store`, soon ``chalicelib.memory``), and the retrieval queries in :mod:`chalicelib.search`.

Tenant-scoped functions take the caller's ``tenant_id`` and every statement filters on it (row-level security
enforces it again on a tenant connection); the few that work across tenants (housekeeping) say so and run as the
owner.

Nothing is imported here: ``from chalicelib.store import files`` loads only what it names (Lambda cold start).
"""

__all__ = [
    # shared plumbing
    "blob_refs",
    "blobs",
    "db",
    "dsn",
    "embedded",
    "migrate",
    "paging",
    # knowledge tables
    "api_keys",
    "attachments",
    "batches",
    "chunks",
    "drop_errors",
    "drop_objects",
    "embedding_cache",
    "files",
    "ingest_jobs",
    "staged_chunks",
    "uploads",
    "vector_stores",
]
