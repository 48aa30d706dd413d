"""Connections to Postgres: the URL (``DATABASE_URL`` or the embedded server), pgvector registration,
migrations on first connect, and feature detection of the pgvector version (0.6 locally, 0.8 on AWS)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import psycopg
from pgvector.psycopg import register_vector

from chalicelib.config import Settings
from chalicelib.store.migrate import migrate


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the connected pgvector can do.

    Attributes:
        pgvector_version: e.g. ``(0, 6, 2)``.
        iterative_scan: ``hnsw.iterative_scan`` exists (pgvector ≥ 0.8.0): filtered HNSW scans keep going until
            enough rows pass the filter.
        halfvec: the ``halfvec`` type exists (pgvector ≥ 0.7.0): HNSW over 2,001–4,000 dimensions.
    """

    pgvector_version: tuple[int, ...]

    @property
    def iterative_scan(self) -> bool:
        return self.pgvector_version >= (0, 8, 0)

    @property
    def halfvec(self) -> bool:
        return self.pgvector_version >= (0, 7, 0)


def database_url(settings: Settings) -> str:
    """``settings.database_url``, or the embedded server's URL (starting it) when unset."""
    if settings.database_url:
        return settings.database_url
    from chalicelib.store.embedded import embedded_database_url

    return embedded_database_url(settings.data_dir)


@functools.cache
def _migrated(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn)
    return True


def connect(settings: Settings) -> psycopg.Connection:
    """An autocommit connection with pgvector registered; the schema is migrated once per process and URL.

    Use ``with conn.transaction():`` for atomic work. The caller closes the connection.

    Raises:
        psycopg.OperationalError: the database cannot be reached.
    """
    url = database_url(settings)
    _migrated(url)
    conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    return conn


def capabilities(conn: psycopg.Connection) -> Capabilities:
    """Detect the installed pgvector version on ``conn``."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    version = tuple(int(part) for part in row[0].split(".")) if row else (0,)
    return Capabilities(pgvector_version=version)
