"""The ingestion queue's handler (``app.ingest``): S3 drop-folder events and ``ingest.file`` messages.

Per record: decode (:mod:`chalicelib.events.messages`); ignore ``s3:TestEvent``; apply each S3 event record
(:func:`chalicelib.events.drop.apply`) or stage the named file version (:func:`chalicelib.events.versions.stage`).
A record that fails is reported in ``batchItemFailures`` and comes back after the visibility timeout; when its
last allowed receive fails (``Settings.max_receives``), the file it was for is failed with ``last_error`` first
(or, if no file was reached, a ``drop_errors`` row is left), and SQS moves it to ``engram-ingest-dlq``.
"""

from __future__ import annotations

import logging
from typing import Any

from chalicelib import deps
from chalicelib.events import batch, drop, messages, versions

logger = logging.getLogger("engram.events")


def handle(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Process a Lambda SQS event (dict) from the ingestion queue; returns ``{"batchItemFailures": [...]}``."""
    return batch.process(event, _record, context)


def _record(record: Any) -> None:
    settings, embedder = deps.current_settings(), deps.embedder()
    last = batch.is_last_receive(record, settings)
    message = messages.decode_ingest(record.body)
    if isinstance(message, messages.TestEvent):
        logger.info("ignored s3:TestEvent for bucket %s", message.bucket)
        return
    if isinstance(message, messages.FileMessage):
        _file(settings, embedder, message, last, batch.first_received_at(record))
        return
    for s3_record in message:
        try:
            outcome = drop.apply(settings, embedder, s3_record, arrived_at=batch.first_received_at(record))
        except Exception as exc:
            if last:
                drop.give_up(settings, s3_record, exc)
            raise
        logger.info("s3://%s/%s %s: %s", s3_record.bucket, s3_record.key, s3_record.event_name, outcome)


def _file(settings, embedder, message: messages.FileMessage, last: bool, arrived_at) -> None:
    from chalicelib.store.db import tenant_connection

    with tenant_connection(settings, message.tenant) as conn:
        try:
            outcome = versions.stage(conn, settings, embedder, message, arrived_at=arrived_at)
        except Exception as exc:
            if last:
                versions.give_up(conn, message.tenant, message.vector_store_id, message.file_id, message.version,
                                 exc)
            raise
    logger.info("%s v%d: %s", message.file_id, message.version, outcome)
