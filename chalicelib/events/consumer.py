"""The SQS consumer every queue's Lambda function runs (``app.py`` generates one per row of
:data:`chalicelib.dispatch.table.QUEUES`): each record is decoded and handed to its handler.

Per record: an S3 event notification (the ingestion queue also receives the drop bucket's) is applied record by
record (:func:`chalicelib.events.drop.apply`; ``s3:TestEvent`` is ignored); anything else is one of Engram's
messages, run through the message table (:func:`chalicelib.dispatch.table.handle`). A record that fails is reported
in ``batchItemFailures`` and comes back after the visibility timeout; when its last allowed receive fails
(``Settings.max_receives``), the failure is recorded first (the file shows ``last_error``, or a ``drop_errors`` row
is left) and SQS moves it to the queue's dead-letter queue.

Once a record finds the database unreachable (:func:`chalicelib.store.db.unreachable`), the batch's remaining
records fail at once rather than each meeting the same outage; all of them come back.

The batch is acknowledged as a whole (Lambda deletes its succeeded records when the handler returns), so it is made
durable as a whole: the records' commits do not wait for the disk, one flush at the end does
(:func:`chalicelib.store.db.deferred_durability`), and then the follow-up messages the records sent are sent
together (:class:`chalicelib.dispatch.outbox.Outbox`). If either fails, the handler raises and every record of the
batch comes back.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg

from chalicelib import deps
from chalicelib.config import Settings
from chalicelib.dispatch import table
from chalicelib.dispatch.outbox import Outbox
from chalicelib.dispatch.port import Delivery, Message, MessageError, decode
from chalicelib.events import batch, notifications

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

__all__ = ["decode_body", "handle"]

logger = logging.getLogger("engram.events")


def handle(event: dict[str, Any], context: Any = None) -> PartialItemFailureResponse:
    """Process a Lambda SQS event (dict) from any of Engram's queues; returns ``{"batchItemFailures": [...]}``.

    Raises:
        psycopg.OperationalError: the batch's database work could not be made durable (every record returns).
        UpstreamError / ConfigurationError: its follow-up messages could not be sent (every record returns).
    """
    from chalicelib.store.db import deferred_durability

    settings = deps.current_settings()
    outbox = Outbox(deps.dispatcher(settings))
    with deferred_durability(settings):
        response = batch.process(event, _failing_fast(lambda record: _record(record, settings, outbox)), context)
    outbox.flush()
    return response


def _failing_fast(record_handler: Callable[[Any], None]) -> Callable[[Any], None]:
    """``record_handler`` for one batch, except that after a record failed because the database is unreachable,
    the remaining records fail at once (``DatabaseUnavailableError``) instead of each waiting for the same outage.
    Every failed record is reported and comes back after its visibility timeout."""
    from chalicelib.errors import DatabaseUnavailableError
    from chalicelib.store.db import unreachable

    outage: list[BaseException] = []

    def run(record: Any) -> None:
        if outage:
            raise DatabaseUnavailableError("not tried: the database was unreachable for an earlier record of the "
                                           f"batch ({type(outage[0]).__name__})")
        try:
            record_handler(record)
        except psycopg.OperationalError as exc:
            if unreachable(exc):
                outage.append(exc)
            raise

    return run


def _record(record: Any, settings: Settings, outbox: Outbox) -> None:
    delivery = Delivery(settings=settings, dispatcher=outbox, arrived_at=batch.first_received_at(record),
                        last_attempt=batch.is_last_receive(record, settings))
    body = decode_body(record.body)
    if isinstance(body, notifications.TestEvent):
        logger.info("ignored s3:TestEvent for bucket %s", body.bucket)
    elif isinstance(body, list):
        _drop(body, delivery)
    else:
        outcome = table.handle(body, delivery)
        logger.info("%s: %s", body, outcome)


def decode_body(body: str) -> notifications.TestEvent | list[notifications.S3Record] | Message:
    """What a queue record's body holds: an S3 notification (its records, or a test event), else one of Engram's
    messages.

    Raises:
        MessageError: not JSON, not an object, or none of the known shapes (the record ends in the DLQ).
    """
    data = _json(body)
    notification = notifications.decode(data)
    return notification if notification is not None else decode(data)


def _drop(records: list[notifications.S3Record], delivery: Delivery) -> None:
    from chalicelib.events import drop

    embedder = deps.embedder(delivery.settings)
    for s3_record in records:
        try:
            outcome = drop.apply(delivery, embedder, s3_record)
        except Exception as exc:
            if delivery.last_attempt:
                drop.give_up(delivery.settings, s3_record, exc)
            raise
        logger.info("s3://%s/%s %s: %s", s3_record.bucket, s3_record.key, s3_record.event_name, outcome)


def _json(body: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        raise MessageError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise MessageError("the body is not a JSON object")
    return data
