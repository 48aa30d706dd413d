"""Running messages in this process: in background threads (``engram serve`` without a queue, the test servers),
or in the caller's thread (``inline``: an attach small enough to finish inside its request, ``engram ingest``).

Each message is delivered once (:attr:`Delivery.last_attempt` is true): a handler that fails records the failure
through its ``give_up`` (the file shows ``last_error``), exactly as SQS's last receive would. Work held by a process
that dies is not lost for good: its lease expires and housekeeping re-sends it (the dispatcher is not
``durable``, so that happens after one lease rather than after SQS's redeliveries).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from chalicelib.config import Settings
from chalicelib.dispatch import table
from chalicelib.dispatch.port import Delivery, Dispatcher, Message

__all__ = ["LocalDispatcher"]

logger = logging.getLogger("engram.dispatch")


class LocalDispatcher:
    """Messages handled in this process: ``threads`` background threads (daemon, created on the first send), or
    none — ``threads=0`` runs every message inline, before :meth:`send` returns. Follow-up messages a handler sends
    go back through the same dispatcher. An inline dispatcher with a ``deadline`` (``time.monotonic()`` seconds)
    hands its handlers that deadline and ``overflow``, the dispatcher for the work that does not fit before it
    (:attr:`Delivery.deadline`)."""

    durable = False

    def __init__(self, settings: Settings, *, threads: int = 2, deadline: float | None = None,
                 overflow: Dispatcher | None = None) -> None:
        self._settings = settings
        self._threads = threads
        self._deadline, self._overflow = deadline, overflow
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def inline(self) -> bool:
        """Whether messages run in the sender's thread."""
        return self._threads == 0

    def send(self, messages: Sequence[Message]) -> None:
        """Handle ``messages`` now (inline) or queue them for the background threads. Never raises for a failing
        handler: the failure is recorded by the handler's ``give_up`` and logged. A message counts as received
        when sent (so, like an SQS retry, it cannot re-open work that failed after it was sent)."""
        sent_at = datetime.now(UTC)
        for message in messages:
            if self.inline:
                self._run(message, sent_at)
            else:
                self._pool().submit(self._run, message, sent_at)

    def _run(self, message: Message, sent_at: datetime) -> None:
        delivery = Delivery(settings=self._settings, dispatcher=self, arrived_at=sent_at, inline=self.inline,
                            deadline=self._deadline if self.inline else None, overflow=self._overflow)
        try:
            outcome = table.handle(message, delivery)
            logger.debug("%s: %s", message, outcome)
        except Exception:
            logger.exception("%s failed", message.kind)

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self._threads, thread_name_prefix="engram-dispatch")
            return self._executor

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop the background threads (finishing queued messages when ``wait``)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait)
