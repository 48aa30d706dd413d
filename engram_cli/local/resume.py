"""Re-sending the work a stopped local stack held in its queues.

moto's queues live in memory: stopping (or killing) ``engram serve`` loses every message not yet handled, while the
database still shows the work open — files ``in_progress`` with a ``pending``/``embedding`` version, memory add jobs
``queued``/``in_progress``. Deployed, SQS keeps the messages, and housekeeping only re-sends a version after
:data:`chalicelib.ingest.engine.DURABLE_STALL_S` (6 h). So when the local stack starts, before the pump, every open
piece of work gets its message again: ``ingest.file`` for each open version (its handler re-sends a staged
version's outstanding ``embed.batch`` messages) and ``memory.add`` for each open job. Every handler is idempotent
(keyed on the version and batch, or the job), so a message that does survive somewhere changes nothing twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from chalicelib.config import Settings
from chalicelib.dispatch.port import Dispatcher

__all__ = ["Resent", "resend_open_work"]

logger = logging.getLogger("engram.local")


@dataclass(frozen=True, slots=True)
class Resent:
    """What :func:`resend_open_work` sent: ``versions`` (``ingest.file`` messages) and ``memory_jobs``
    (``memory.add`` messages)."""

    versions: int
    memory_jobs: int


def resend_open_work(config: Settings, dispatcher: Dispatcher) -> Resent:
    """Send, through ``dispatcher`` (the stack's queues), the message of every open ingestion version and every
    open memory add job of every tenant (read as the owner of ``config``'s database).

    Raises:
        UpstreamError: the queue refused a send (what was sent before stays sent).
    """
    from chalicelib.ingest.messages import FileMessage
    from chalicelib.memory import open_add_jobs
    from chalicelib.store import ingest_jobs
    from chalicelib.store.db import connect

    with connect(config) as conn:
        versions = [FileMessage(*row) for row in ingest_jobs.open_versions(conn)]
        jobs = open_add_jobs(conn)
    if versions:
        dispatcher.send(versions)
    if jobs:
        dispatcher.send(jobs)
    if versions or jobs:
        logger.info("re-sent %d open file version(s) and %d memory job(s) of the previous run", len(versions),
                    len(jobs))
    return Resent(versions=len(versions), memory_jobs=len(jobs))
