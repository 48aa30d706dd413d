"""Apply the numbered ``migrations/NNNN_*.sql`` files in order, once each, recording them in ``schema_migrations``.

Runs under a transaction-level advisory lock so concurrent starters (several Lambdas, CLI + server) apply each
migration exactly once.
"""

from __future__ import annotations

from importlib import resources

import psycopg

# Arbitrary constant key for pg_advisory_xact_lock: "engram" in ASCII.
_MIGRATION_LOCK_KEY = 0x656E6772616D

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     text PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
)"""


def migration_files() -> list[tuple[str, str]]:
    """``(version, sql)`` for every bundled migration, sorted by version (the file name without ``.sql``)."""
    folder = resources.files("chalicelib.store") / "migrations"
    found = [(p.name.removesuffix(".sql"), p.read_text("utf-8")) for p in folder.iterdir() if p.name.endswith(".sql")]
    return sorted(found)


def migrate(conn: psycopg.Connection) -> list[str]:
    """Apply pending migrations on ``conn`` (autocommit or not) and return the versions applied now."""
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK_KEY,))
        conn.execute(_CREATE_TABLE)
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for version, sql in migration_files():
            if version in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
            applied_now.append(version)
    return applied_now
