"""Holding the messages a batch of work sends until the batch is done: an SQS handler's records send their
follow-ups through an :class:`Outbox`, and the consumer flushes it once, after the batch's database work is
durable, in as few ``SendMessageBatch`` calls as the messages need (ten per call) instead of one call or more per
record. A follow-up therefore never names state that a crash could still take back.

If the flush fails, the whole batch is reported failed and delivered again: every handler is idempotent and a
redelivered record re-sends what its version still needs (e.g. the embedding batches that have not landed).
"""

from __future__ import annotations

from collections.abc import Sequence

from chalicelib.dispatch.port import Dispatcher, Message

__all__ = ["Outbox"]


class Outbox:
    """A :class:`~chalicelib.dispatch.port.Dispatcher` that keeps what is sent until :meth:`flush` hands it to
    ``target`` (durable exactly when ``target`` is). Not thread-safe: one per batch of records, used by one
    thread."""

    def __init__(self, target: Dispatcher) -> None:
        self._target = target
        self._held: list[Message] = []
        self.durable = target.durable

    def send(self, messages: Sequence[Message]) -> None:
        """Hold ``messages`` for :meth:`flush` (never raises)."""
        self._held.extend(messages)

    def flush(self) -> int:
        """Send every held message to the target in one call; returns how many were sent.

        Raises:
            UpstreamError / ConfigurationError: from the target (the messages are kept for another flush).
        """
        if not self._held:
            return 0
        self._target.send(self._held)
        sent, self._held = len(self._held), []
        return sent
