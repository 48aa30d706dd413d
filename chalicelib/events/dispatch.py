"""Sending Engram's messages (:mod:`chalicelib.events.messages`) to the ingestion and embedding queues, ten per
``SendMessageBatch`` call (SQS's limit per call)."""

from __future__ import annotations

from typing import Sequence

from chalicelib.config import Settings
from chalicelib.errors import InvalidRequestError, UpstreamError
from chalicelib.events import aws
from chalicelib.events.messages import BatchMessage, FileMessage

# SendMessageBatch takes at most 10 entries (Amazon SQS API Reference, SendMessageBatch).
SEND_BATCH = 10


def send_files(settings: Settings, messages: Sequence[FileMessage]) -> None:
    """Queue files for ingestion on ``settings.ingest_queue``.

    Raises:
        InvalidRequestError: no ingestion queue is configured (``ENGRAM_INGEST_QUEUE``).
        UpstreamError: SQS refused some messages or failed.
    """
    if not settings.ingest_queue:
        raise InvalidRequestError("ENGRAM_INGEST_QUEUE is not set.", param="ENGRAM_INGEST_QUEUE")
    _send(settings, settings.ingest_queue, [m.to_body() for m in messages])


def send_batches(settings: Settings, messages: Sequence[BatchMessage]) -> None:
    """Queue embedding batches on ``settings.embed_queue``.

    Raises:
        InvalidRequestError: no embedding queue is configured (``ENGRAM_EMBED_QUEUE``).
        UpstreamError: SQS refused some messages or failed.
    """
    if not settings.embed_queue:
        raise InvalidRequestError("ENGRAM_EMBED_QUEUE is not set.", param="ENGRAM_EMBED_QUEUE")
    _send(settings, settings.embed_queue, [m.to_body() for m in messages])


def _send(settings: Settings, queue: str, bodies: list[str]) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    if not bodies:
        return
    try:
        url = aws.queue_url(settings.aws_region, queue)
        client = aws.sqs(settings.aws_region)
        for start in range(0, len(bodies), SEND_BATCH):
            entries = [{"Id": str(i), "MessageBody": body}
                       for i, body in enumerate(bodies[start:start + SEND_BATCH])]
            failed = client.send_message_batch(QueueUrl=url, Entries=entries).get("Failed") or []
            if failed:
                raise UpstreamError(f"SQS refused {len(failed)} message(s) for {queue}: "
                                    f"{failed[0].get('Code')}: {failed[0].get('Message')}")
    except (BotoCoreError, ClientError) as exc:
        raise UpstreamError(f"Sending to SQS queue {queue} failed: {str(exc)[:300]}") from exc
