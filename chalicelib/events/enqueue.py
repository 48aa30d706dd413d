"""Handing API attachments to the ingestion queue (deployed: ``Settings.ingest_queue`` set) instead of local
background threads: each file's next version is claimed here and an ``ingest.file`` message names it."""

from __future__ import annotations

import logging
from typing import Sequence

import psycopg

from chalicelib.config import Settings
from chalicelib.errors import EngramError
from chalicelib.events import dispatch
from chalicelib.events.messages import FileMessage
from chalicelib.store import ingest_jobs

logger = logging.getLogger("engram.events")


def enqueue_files(conn: psycopg.Connection, tenant_id: str, store_id: str, file_ids: Sequence[str], *,
                  settings: Settings) -> int:
    """Claim a version of each attached ``in_progress`` file (lease ``settings.processing_lease_s`` seconds) and
    queue it; returns how many were queued. A failed send is logged, not raised (the attach itself succeeded):
    the versions are abandoned (:func:`ingest_jobs.abandon`) and the next housekeeping pass re-sends the files."""
    queued = []
    for file_id in file_ids:
        version = ingest_jobs.start(conn, tenant_id, store_id, file_id, lease_s=settings.processing_lease_s,
                                    max_attempts=settings.processing_max_attempts)
        if version is not None:
            queued.append(FileMessage(tenant_id, store_id, file_id, version))
    try:
        dispatch.send_files(settings, queued)
    except EngramError as exc:
        logger.warning("could not queue %d file(s) of %s for ingestion (housekeeping retries): %s",
                       len(queued), store_id, exc.message)
        for message in queued:
            ingest_jobs.abandon(conn, tenant_id, store_id, message.file_id, message.version)
        return 0
    return len(queued)
