"""The dispatch port: how the domain says "process these files", "embed this batch", "run this job" (soon
"extract memories from this response") without knowing whether SQS, a background thread or the caller's own
thread does the work.

- :class:`Message` — a small frozen dataclass naming its ``kind``; every kind has one row in the message table
  (:mod:`chalicelib.dispatch.table`): its class, its queue and its handler, so a new kind of message is one entry.
- :class:`Dispatcher` — ``send(messages)``. Deployed (``ENGRAM_INGEST_QUEUE`` set, also the local moto stack) it is
  :class:`~chalicelib.dispatch.sqs.SqsDispatcher`; otherwise :class:`~chalicelib.dispatch.local.LocalDispatcher`,
  which runs the handlers in background threads of this process, or in the caller's thread (``inline``).
- :func:`chalicelib.dispatch.table.handle` — what a queue consumer (the SQS Lambda handlers, the local pump, the
  local dispatcher) calls for one decoded message.

``deps.dispatcher()`` builds the process's dispatcher; tests replace it with ``deps.set_dispatcher``.
"""

from chalicelib.dispatch.port import Delivery, Dispatcher, Message, MessageError, decode, encode

__all__ = ["Delivery", "Dispatcher", "Message", "MessageError", "decode", "encode"]
