"""Background processing for one machine: a thread that claims ``in_progress`` files (any tenant) and processes
them, and runs the housekeeping that keeps statuses true — failing files whose workers died, deleting expired
vector stores and files.

When deployed, SQS-triggered Lambdas do this work instead; this worker is what ``engram serve`` runs locally.
"""

from __future__ import annotations

import logging
import threading
import time

from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.ingest.attach import process_claimed
from chalicelib.store import files as file_rows
from chalicelib.store import uploads
from chalicelib.store.blobs import blob_store
from chalicelib.store import processing
from chalicelib.store import vector_stores

logger = logging.getLogger("engram.worker")

# Seconds between housekeeping passes, and the longest a worker sleeps when it has nothing to do.
HOUSEKEEPING_INTERVAL_S = 30.0
IDLE_WAIT_S = 5.0


def work_once(settings: Settings, embedder: Embedder, conn=None) -> bool:
    """Claim and process one pending file; False when there was none. Uses ``conn`` (an owner connection) or opens
    one."""
    from chalicelib.store.db import connect

    own = conn is None
    conn = conn or connect(settings)
    try:
        job = processing.claim_next(conn, lease_s=settings.processing_lease_s,
                                    max_attempts=settings.processing_max_attempts)
        if job is None:
            return False
        try:
            store = vector_stores.get(conn, job.tenant_id, job.vector_store_id)
            result = process_claimed(conn, job.tenant_id, store, job.file_id, attempt=job.attempts,
                                     embedder=embedder)
            logger.info("processed %s in %s: %s", job.file_id, job.vector_store_id, result.status)
        except Exception:  # recorded on the file by process_file; the lease covers anything else
            logger.exception("processing %s failed", job.file_id)
        return True
    finally:
        if own:
            conn.close()


def housekeeping(settings: Settings, conn=None) -> dict[str, int]:
    """One pass: fail files whose final lease expired, delete expired stores (past the retention) and expired
    files, and the parts of finished or expired uploads. Returns counts ``{"failed_files", "expired_stores",
    "expired_files", "stale_uploads"}``."""
    from chalicelib.store.db import connect

    own = conn is None
    conn = conn or connect(settings)
    try:
        return {
            "failed_files": processing.settle(conn, max_attempts=settings.processing_max_attempts,
                                              unclaimed_after_s=settings.unclaimed_after_s),
            "expired_stores": vector_stores.sweep_expired(conn, retention_s=settings.expired_retention_s),
            "expired_files": file_rows.sweep_expired(conn),
            "stale_uploads": uploads.sweep_expired(conn, blob_store(settings)),
        }
    finally:
        if own:
            conn.close()


class BackgroundWorker:
    """``threads`` daemon threads running :func:`work_once` until :meth:`stop`, woken early by :meth:`notify`,
    with :func:`housekeeping` every :data:`HOUSEKEEPING_INTERVAL_S` seconds."""

    def __init__(self, settings: Settings, embedder: Embedder, *, threads: int = 1) -> None:
        self._settings, self._embedder = settings, embedder
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=self._run, name=f"engram-worker-{i}", daemon=True)
                         for i in range(threads)]
        self._last_housekeeping = 0.0

    def start(self) -> "BackgroundWorker":
        """Start the threads; returns self."""
        for thread in self._threads:
            thread.start()
        return self

    def notify(self) -> None:
        """Wake the workers: files await processing."""
        self._wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the threads to finish their current file and exit; waits up to ``timeout_s`` seconds each."""
        self._stopping.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout_s)

    def _run(self) -> None:
        from chalicelib.store.db import connect

        conn = None
        while not self._stopping.is_set():
            try:
                if conn is None or conn.closed:
                    conn = connect(self._settings)
                if time.monotonic() - self._last_housekeeping > HOUSEKEEPING_INTERVAL_S:
                    self._last_housekeeping = time.monotonic()
                    housekeeping(self._settings, conn)
                if work_once(self._settings, self._embedder, conn):
                    continue
            except Exception:
                logger.exception("background worker pass failed")
                if conn is not None:
                    conn.close()
                conn = None
            self._wake.wait(IDLE_WAIT_S)
            self._wake.clear()
        if conn is not None:
            conn.close()
