"""The embedding queue's handler (``app.embed``): one ``embed.batch`` message per record
(:func:`chalicelib.events.versions.land`).

The embedder retries 429/5xx/timeouts itself with backoff (:mod:`chalicelib.embed.openai_http`); when it still
fails the record is reported failed and SQS redelivers it after the visibility timeout. On its last allowed
receive (``Settings.max_receives``) the file is failed with ``last_error`` before SQS moves the message to
``engram-embed-dlq``; redriving it later re-opens the version and completes the file.
"""

from __future__ import annotations

import logging
from typing import Any

from chalicelib import deps
from chalicelib.events import batch, messages, versions

logger = logging.getLogger("engram.events")


def handle(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Process a Lambda SQS event (dict) from the embedding queue; returns ``{"batchItemFailures": [...]}``."""
    return batch.process(event, _record, context)


def _record(record: Any) -> None:
    from chalicelib.store.db import tenant_connection

    settings, embedder = deps.current_settings(), deps.embedder()
    message = messages.decode_batch(record.body)
    with tenant_connection(settings, message.tenant) as conn:
        try:
            outcome = versions.land(conn, settings, embedder, message, arrived_at=batch.first_received_at(record))
        except Exception as exc:
            if batch.is_last_receive(record, settings):
                versions.give_up(conn, message.tenant, message.vector_store_id, message.file_id, message.version,
                                 exc)
            raise
    logger.info("%s v%d batch %d: %s", message.file_id, message.version, message.batch, outcome)
