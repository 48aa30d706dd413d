"""The embedded database: Postgres 16 + pgvector 0.6 from the PyPI package ``pgserver``, data under a folder.

Used when ``DATABASE_URL`` is unset, so a laptop needs nothing installed by hand. pgserver shares one server
between processes using the same folder and stops it when the last of them exits.
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path


@functools.cache
def embedded_database_url(data_dir: Path) -> str:
    """Start (or join) the embedded server whose data lives in ``data_dir/pg`` and return its libpq URL.

    Raises:
        RuntimeError: pgserver is not installed (install the local requirements) or the server fails to start.
    """
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI)
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "DATABASE_URL is unset and the embedded Postgres (pgserver) is not installed; "
            "install requirements-local.txt or set DATABASE_URL."
        ) from exc
    pgdata = Path(data_dir).expanduser().resolve() / "pg"
    pgdata.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = pgserver.get_server(pgdata)
    return server.get_uri()
