"""Serving the API on this machine: Chalice's threaded local server running the real ``app.py`` (same routes,
middleware and Lambda event shapes as API Gateway), plus the background worker that processes large files.

Used by ``engram serve`` and by the tests, which start it on an ephemeral port.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from chalicelib import deps
from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.ingest import attach
from chalicelib.ingest.worker import BackgroundWorker


@dataclass
class RunningServer:
    """A server started by :func:`start`: ``url`` is the API root (``http://host:port/v1``)."""

    url: str
    host: str
    port: int
    _server: object
    _thread: threading.Thread
    _worker: BackgroundWorker | None

    def stop(self) -> None:
        """Stop accepting requests, stop the worker, close the database pools."""
        from chalicelib.store.db import close_pools

        self._server.shutdown()
        self._server.server.server_close()
        self._thread.join(10)
        if self._worker is not None:
            attach.set_pending_listener(None)
            self._worker.stop()
        close_pools()


def start(settings: Settings, *, host: str = "127.0.0.1", port: int = 8000, embedder: Embedder | None = None,
          worker_threads: int = 1) -> RunningServer:
    """Serve ``app.py`` on ``host:port`` (0 picks a free port) in a daemon thread, with ``worker_threads``
    background workers (0: none). ``settings`` and ``embedder`` become the process's (see :mod:`chalicelib.deps`).

    Raises:
        OSError: the port is taken.
    """
    from chalice.config import Config
    from chalice.local import LocalChalice, LocalDevServer, create_local_server

    import app as application

    deps.set_settings(settings)
    if embedder is not None:
        deps.set_embedder(embedder)
    from chalicelib.store.db import pool

    pool(settings)  # start the database and migrate before the first request
    config = Config.create(chalice_stage="dev", app_name="engram")
    if isinstance(application.app, LocalChalice):  # served before in this process (tests start one per module):
        server = LocalDevServer(application.app, config, host, port)  # re-wrapping would make a class cycle
    else:
        server = create_local_server(application.app, config, host, port)
    actual_port = server.server.server_address[1]
    thread = threading.Thread(target=server.server.serve_forever, name="engram-http", daemon=True)
    thread.start()
    worker = None
    if worker_threads > 0:
        worker = BackgroundWorker(settings, deps.embedder(settings), threads=worker_threads).start()
        attach.set_pending_listener(worker.notify)
    return RunningServer(url=f"http://{host}:{actual_port}/v1", host=host, port=actual_port, _server=server,
                         _thread=thread, _worker=worker)
