"""Speed fixes for the moto server the local stack runs in this process (behaviour unchanged).

moto 5.x checks each message it hands out against the queue's retention period through
``SQSBackend.get_queue_attributes``, which computes every attribute of the queue — including the message counts,
each a pass over all its messages — to read one number. ``ReceiveMessage`` therefore costs O(messages in the queue)
per message returned: with a few hundred dropped files queued, moto's receives took more CPU than Engram's handlers
(benchmarks/pipeline.py, profiled). The replacement reads the retention period from the queue directly.
"""

from __future__ import annotations

import logging

__all__ = ["apply"]

logger = logging.getLogger("engram.local")


def apply() -> bool:
    """Install the fixes in this process's moto (idempotent); returns whether they are installed (False: this moto
    has not the expected shape, and is left as it is)."""
    try:
        from moto.core.utils import unix_time
        from moto.sqs.models import Message, SQSBackend
    except ImportError:  # pragma: no cover - moto is a dependency of the local stack
        return False
    current = getattr(SQSBackend, "is_message_valid_based_on_retention_period", None)
    if current is None:
        logger.debug("moto's SQSBackend has no retention check to replace")
        return False
    if getattr(current, "_engram", False):
        return True

    def is_message_valid_based_on_retention_period(self: SQSBackend, queue_name: str, message: Message) -> bool:
        queue = self.get_queue(queue_name)
        retention_s = int(queue.message_retention_period)  # type: ignore[attr-defined]  # set from its attribute
        return retention_s + (message.sent_timestamp or 0) / 1000 > unix_time()

    is_message_valid_based_on_retention_period._engram = True  # type: ignore[attr-defined]
    SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        is_message_valid_based_on_retention_period)
    return True
