"""Connections to Postgres: the URL (``DATABASE_URL`` or the embedded server), pgvector registration,
migrations on first connect, the process's pool (failing fast while the database is away and recovering at once:
:mod:`chalicelib.store.pooling`; every connection attempt bounded by ``ENGRAM_DB_CONNECT_TIMEOUT_S``), and feature
detection of the pgvector version (0.8 embedded and on AWS; a ``DATABASE_URL`` server may be older)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from chalicelib.config import Settings
from chalicelib.errors import EngramError
from chalicelib.store.migrate import migrate

if TYPE_CHECKING:
    from chalicelib.store.pooling import EngramPool

RowT = TypeVar("RowT")


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
    """``settings.database_url``; else the URL in the Secrets Manager secret ``settings.database_secret_arn``
    (deployed); else the embedded server's URL (starting it)."""
    if settings.database_url:
        return settings.database_url
    if settings.database_secret_arn:
        from chalicelib.store.dsn import url_from_secret_arn

        return url_from_secret_arn(settings.database_secret_arn, settings.aws_region)
    from chalicelib.store.embedded import embedded_database_url

    return embedded_database_url(settings.data_dir)


@functools.cache
def _migrated(url: str, auto_migrate: bool = True, connect_timeout_s: int = 0) -> bool:
    if auto_migrate:
        with psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout_s) as conn:
            migrate(conn)
    return True


def connect(settings: Settings) -> psycopg.Connection:
    """An autocommit connection with pgvector registered; the schema is migrated once per process and URL. Each
    attempt to connect takes at most ``settings.db_connect_timeout_s`` seconds.

    Use ``with conn.transaction():`` for atomic work. The caller closes the connection.

    Raises:
        psycopg.OperationalError: the database cannot be reached.
    """
    url = database_url(settings)
    _migrated(url, settings.auto_migrate, settings.db_connect_timeout_s)
    conn = psycopg.connect(url, autocommit=True, connect_timeout=settings.db_connect_timeout_s)
    register_vector(conn)
    return conn


# The database role the HTTP API acts as; row-level security applies to it (migrations/0003_row_level_security.sql).
APP_ROLE = "engram_app"
# The setting the row-level security policies read the caller's tenant from.
TENANT_SETTING = "engram.tenant"
_RESET = sql.SQL("RESET ROLE; RESET {}; RESET synchronous_commit").format(
    sql.Identifier(*TENANT_SETTING.split(".")))
_AS_TENANT = "SET ROLE {role}; SELECT set_config({name}, {tenant}, false)"
# Inside deferred_durability: commits return before their WAL reaches the disk (PostgreSQL "Asynchronous Commit":
# a crash may lose the last few, never leaving the database inconsistent).
_AS_TENANT_DEFERRED = _AS_TENANT + ", set_config('synchronous_commit', 'off', false)"
# A commit that waits for its WAL to be flushed, and with it every earlier commit's (WAL is one sequence).
# PostgreSQL waits at commit only for a transaction that has an id and wrote WAL before its commit record
# (RecordTransactionCommit, xact.c): the id is assigned, and a non-transactional logical message (a WAL record
# nothing reads unless a logical decoder subscribes to the "engram" prefix) is the write. No table is touched, so
# concurrent flushes do not queue on a row lock and share the disk flush (group commit).
_FLUSH = "SELECT pg_current_xact_id(), pg_logical_emit_message(false, 'engram.flush', '')"
_deferral: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar("engram_deferred_durability",
                                                                              default=None)

_pools: dict[tuple[str, int, int, float], EngramPool] = {}
_pools_lock = threading.Lock()


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)


def _reset(conn: psycopg.Connection) -> None:
    conn.execute(_RESET)


def pool(settings: Settings) -> EngramPool:
    """The process's connection pool for ``settings`` (psycopg_pool, autocommit, pgvector registered; at most
    ``settings.db_pool_size`` connections), created and the schema migrated on first use.

    While the database is away it fails fast and it recovers by itself (:mod:`chalicelib.store.pooling`): a
    connection attempt takes at most ``settings.db_connect_timeout_s``, a checkout waits at most
    ``settings.db_pool_timeout_s`` (less when an attempt fails meanwhile), a connection the server closed is
    replaced, not handed out.

    Raises:
        psycopg.OperationalError: the pool is new and the database cannot be reached to migrate it.
    """
    from chalicelib.store.pooling import EngramPool

    url = database_url(settings)
    key = (url, settings.db_pool_size, settings.db_connect_timeout_s, settings.db_pool_timeout_s)
    with _pools_lock:
        existing = _pools.get(key)
        if existing is None:
            _migrated(url, settings.auto_migrate, settings.db_connect_timeout_s)
            existing = EngramPool(url, min_size=1, max_size=settings.db_pool_size, open=True,
                                  kwargs={"autocommit": True, "connect_timeout": settings.db_connect_timeout_s},
                                  configure=_configure, reset=_reset, timeout=settings.db_pool_timeout_s,
                                  name="engram")
            _pools[key] = existing
    return existing


def ping(settings: Settings) -> float:
    """One round trip (``SELECT 1``) on a pooled connection: seconds, checkout included. The readiness check.

    Raises:
        psycopg.OperationalError: the database cannot be reached (``PoolTimeout`` and its subclasses included).
        EngramError: the database's URL cannot be found (e.g. the embedded server cannot start).
    """
    started = time.monotonic()
    with pool(settings).connection() as conn:
        conn.execute("SELECT 1")
    return time.monotonic() - started


@contextlib.contextmanager
def tenant_connection(settings: Settings, tenant_id: str) -> Iterator[psycopg.Connection]:
    """A pooled autocommit connection acting as :data:`APP_ROLE` for ``tenant_id``: row-level security limits
    every statement on it to that tenant's rows, whatever its WHERE clause says. Returned to the pool (role and
    tenant reset) on exit.

    Raises:
        psycopg.OperationalError: the database cannot be reached.
    """
    deferral = _deferral.get()
    statement = _AS_TENANT if deferral is None else _AS_TENANT_DEFERRED
    with pool(settings).connection() as conn:
        conn.execute(sql.SQL(statement).format(
            role=sql.Identifier(APP_ROLE), name=sql.Literal(TENANT_SETTING), tenant=sql.Literal(tenant_id)))
        if deferral is not None:
            deferral[0] = True
        yield conn


@contextlib.contextmanager
def deferred_durability(settings: Settings) -> Iterator[None]:
    """Durability once for a whole block of work instead of once per commit: tenant connections opened inside the
    block (this thread) commit without waiting for their write-ahead log to reach the disk (``synchronous_commit =
    off``), and leaving the block without an error makes everything they committed durable with one flush (a
    commit that waits for its WAL, which comes after theirs). Meant for a unit of work acknowledged as a whole
    when the block returns (an SQS batch: the messages are deleted afterwards): a crash before the flush loses at
    most that work, whose messages are delivered again; a crash never leaves the database inconsistent. Other
    sessions see each commit at once, as usual.

    Raises:
        psycopg.OperationalError: the flush failed (nothing committed in the block may be durable).
    """
    flag: list[bool] = [False]
    token = _deferral.set(flag)
    try:
        yield
    finally:
        _deferral.reset(token)
    if flag[0]:
        with pool(settings).connection() as conn:
            flush_wal(conn)


def flush_wal(conn: psycopg.Connection) -> None:
    """Make every commit made so far durable, whoever made it: one commit on ``conn`` (autocommit, with
    ``synchronous_commit`` on) that waits for its write-ahead log, which comes after theirs."""
    conn.execute(_FLUSH)


def pipeline(conn: psycopg.Connection) -> contextlib.AbstractContextManager[object]:
    """Pipeline mode for a block (statements are sent without waiting for each result; fetching a result, or the
    block's end, waits): the connection's own when it is already in pipeline mode, so nesting adds no round trip.
    Open the transaction first (``with conn.transaction(), pipeline(conn):``): psycopg syncs the pipeline around a
    transaction opened inside it."""
    if conn.pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF:
        return contextlib.nullcontext()
    return conn.pipeline()


def atomic(conn: psycopg.Connection) -> contextlib.AbstractContextManager[object]:
    """A transaction for a block, or the caller's when one is already open (no savepoint: the block is part of the
    caller's unit of work, which commits or rolls back as a whole). A pipeline with statements in flight counts as
    open: outside a transaction, its statements up to the next sync run as one implicit transaction."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return contextlib.nullcontext()
    return conn.transaction()


# SQLSTATEs meaning the session or the server went away, not that a statement failed: class 08 (connection
# exception), 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now, 53300 too_many_connections
# (PostgreSQL "Appendix A. Error Codes").
_UNREACHABLE_STATES = ("57P01", "57P02", "57P03", "53300")


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached or used right now (no connection could be had, or the
    session ended under the caller) rather than that a statement failed: psycopg_pool's ``PoolTimeout`` (and
    ``DatabaseUnreachable``), an ``OperationalError`` without SQLSTATE (libpq's own: refused, timed out, server
    closed the connection, connection closed), SQLSTATE class 08 or one of :data:`_UNREACHABLE_STATES`. A deadlock
    or a cancelled statement is an ``OperationalError`` too, but not this."""
    from psycopg_pool import PoolTimeout

    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _UNREACHABLE_STATES


def close_pools() -> None:
    """Close every pool of this process (tests, server shutdown)."""
    with _pools_lock:
        for existing in _pools.values():
            existing.close()
        _pools.clear()


def one(cur: psycopg.Cursor[RowT]) -> RowT:
    """The one row an executed statement must return: an ``INSERT ... RETURNING``, an ``UPDATE ... RETURNING`` of
    a row the caller holds, an aggregate without ``GROUP BY``, a row locked just after its upsert. Use it as
    ``one(cur.execute(...))``; the row's type is the cursor's row factory's (a tuple by default).

    Raises:
        EngramError: (500) the statement returned no row — a broken invariant, not the caller's fault.
    """
    row = cur.fetchone()
    if row is None:
        raise EngramError("The database returned no row where one was required.")
    return row


def capabilities(conn: psycopg.Connection) -> Capabilities:
    """Detect the installed pgvector version on ``conn``."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    version = tuple(int(part) for part in row[0].split(".")) if row else (0,)
    return Capabilities(pgvector_version=version)
