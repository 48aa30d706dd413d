"""Sending messages to their SQS queues (deployed, and on the local moto stack), ten per ``SendMessageBatch``
call (SQS's limit per call, Amazon SQS API Reference)."""

from __future__ import annotations

from collections.abc import Sequence

from chalicelib import aws
from chalicelib.config import Settings
from chalicelib.dispatch.port import Message, encode
from chalicelib.dispatch.table import queue_for
from chalicelib.errors import ConfigurationError, UpstreamError

__all__ = ["SEND_BATCH", "SqsDispatcher"]

SEND_BATCH = 10


class SqsDispatcher:
    """Messages go to the queue their kind names (:mod:`chalicelib.dispatch.table`), as configured in
    ``settings`` (``ENGRAM_INGEST_QUEUE``, ``ENGRAM_EMBED_QUEUE``). Durable: SQS keeps them (and redelivers them)
    whatever happens to this process."""

    durable = True

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def send(self, messages: Sequence[Message]) -> None:
        """Send ``messages``, grouped by queue.

        Raises:
            ConfigurationError: a message's queue is not configured (its setting is named).
            UpstreamError: SQS refused some messages or failed.
        """
        by_queue: dict[str, list[str]] = {}
        for message in messages:
            spec = queue_for(message.kind)
            queue = spec.configured(self._settings)
            if not queue:
                raise ConfigurationError(f"{spec.env} is not set: no queue for {message.kind} messages.",
                                         setting=spec.env)
            by_queue.setdefault(queue, []).append(encode(message))
        for queue, bodies in by_queue.items():
            self._send(queue, bodies)

    def _send(self, queue: str, bodies: list[str]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        region = self._settings.aws_region
        try:
            url = aws.queue_url(region, queue)
            client = aws.client("sqs", region)
            for start in range(0, len(bodies), SEND_BATCH):
                entries = [{"Id": str(i), "MessageBody": body}
                           for i, body in enumerate(bodies[start:start + SEND_BATCH])]
                failed = client.send_message_batch(QueueUrl=url, Entries=entries).get("Failed") or []
                if failed:
                    raise UpstreamError(f"SQS refused {len(failed)} message(s) for {queue}: "
                                        f"{failed[0].get('Code')}: {failed[0].get('Message')}")
        except (BotoCoreError, ClientError) as exc:
            raise UpstreamError(f"Sending to SQS queue {queue} failed: {str(exc)[:300]}") from exc
