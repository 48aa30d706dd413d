"""Running an SQS-triggered handler over its batch with Powertools' ``BatchProcessor``: each record is processed
on its own, and the handler answers ``{"batchItemFailures": [{"itemIdentifier": <messageId>}, ...]}`` so only the
failed records return to the queue ("Reporting batch item failures", AWS Lambda Developer Guide; the event source
mapping needs ``FunctionResponseTypes: ["ReportBatchItemFailures"]``, which ``infra/`` sets).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chalicelib.config import Settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse

logger = logging.getLogger("engram.events")


def process(event: dict[str, Any], record_handler: Callable[[Any], Any],
            context: Any = None) -> PartialItemFailureResponse:
    """Run ``record_handler`` on every record of the Lambda SQS ``event`` (a dict); returns the partial-batch
    response. A record whose handler raises is reported failed (and logged); the others succeed. An entirely
    failed batch is answered the same way (not raised), so Lambda and the local pump treat both alike."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return process_partial_response(event=event, record_handler=_logged(record_handler), processor=processor,
                                    context=context)


def receive_count(record: Any) -> int:
    """How many times SQS has delivered the record (``ApproximateReceiveCount``; 1 on the first delivery)."""
    return int(record.attributes.approximate_receive_count or 1)


def is_last_receive(record: Any, settings: Settings) -> bool:
    """Whether a failure now sends the record to its dead-letter queue (receive count ≥ ``max_receives``, the
    redrive policy's ``maxReceiveCount``)."""
    return receive_count(record) >= settings.max_receives


def first_received_at(record: Any) -> datetime | None:
    """When this message was first received (``ApproximateFirstReceiveTimestamp``, epoch milliseconds; else
    ``SentTimestamp``), or None. A message moved back from a dead-letter queue is a new message, so this is after
    the failure that sent it there — however the move preserves other attributes."""
    raw = record.attributes.approximate_first_receive_timestamp or record.attributes.sent_timestamp
    return datetime.fromtimestamp(int(raw) / 1000, tz=UTC) if raw else None


def _logged(record_handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def run(record: Any) -> Any:
        try:
            return record_handler(record)
        except Exception as exc:
            logger.warning("record %s failed (receive %d): %s", record.message_id, receive_count(record),
                           getattr(exc, "message", None) or repr(exc))
            raise

    return run
