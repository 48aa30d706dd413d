"""What a drop-folder sync hands to the ingestion path: one ``drop.object`` message per object whose store does not
match the bucket (a row of :mod:`chalicelib.dispatch.table`, on the ingestion queue, next to S3's own events).

The ingest handler turns the message into a synced :class:`~chalicelib.events.notifications.S3Record` and applies it
with :func:`chalicelib.events.drop.apply`, exactly as an S3 event: the same limits, sidecars, stores by name, error
records, retries and dead-letter queue. Its time is the moment just before the HEAD that saw the object (or its
absence), which orders it against S3's events of the key (:func:`chalicelib.events.drop._order`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from chalicelib.dispatch.port import Delivery, Message, MessageError
from chalicelib.events.notifications import S3Record

__all__ = ["CREATED", "REMOVED", "ObjectMessage", "give_up_object", "handle_object"]

# The values of ``ObjectMessage.event`` and the S3 event names their records carry.
CREATED, REMOVED = "created", "removed"
_EVENT_NAMES = {CREATED: "ObjectCreated:Sync", REMOVED: "ObjectRemoved:Sync"}


@dataclass(frozen=True, slots=True)
class ObjectMessage(Message):
    """Apply object ``key`` of ``bucket`` as a sync found it: ``event`` ``created`` (it exists with ``etag``, its
    ``size`` in bytes) or ``removed`` (gone; ``etag`` empty, ``size`` 0); ``observed`` is the ISO-8601 UTC time
    taken just before the HEAD that found it so. Body ``{"type": "drop.object", "v": 1, "tenant", "bucket", "key",
    "event", "etag", "size", "observed"}`` (under 1.5 KB: keys are at most 1,024 bytes)."""

    kind: ClassVar[str] = "drop.object"
    bucket: str
    key: str
    event: str
    etag: str
    size: int
    observed: str

    def record(self) -> S3Record:
        """The synced S3 record this message stands for.

        Raises:
            MessageError: an unknown ``event`` or a malformed ``observed`` time (the message ends in the DLQ).
        """
        name = _EVENT_NAMES.get(self.event)
        if name is None:
            raise MessageError(f"malformed drop.object message: event {self.event!r} is not created or removed")
        try:
            when = datetime.fromisoformat(self.observed)
        except ValueError:
            raise MessageError(f"malformed drop.object message: observed {self.observed!r} is not a time") from None
        if when.tzinfo is None:
            raise MessageError("malformed drop.object message: observed has no time zone")
        return S3Record(event_name=name, bucket=self.bucket, key=self.key, size=self.size if self.event == CREATED
                        else 0, etag=self.etag or None, sequencer=None, event_time=when, synced=True)


def handle_object(message: ObjectMessage, delivery: Delivery) -> str:
    """Apply the object as an S3 event (:func:`chalicelib.events.drop.apply`); returns its outcome.

    Raises:
        MessageError: a malformed message.
        UpstreamError: S3, SQS or the database failed (the message is retried).
    """
    from chalicelib import deps
    from chalicelib.events import drop

    return drop.apply(delivery, deps.embedder(delivery.settings), message.record())


def give_up_object(message: ObjectMessage, delivery: Delivery, error: BaseException) -> None:
    """The last delivery failed: as for an S3 event (:func:`chalicelib.events.drop.give_up`), the version it
    opened fails (the file shows ``last_error``) or a ``drop_errors`` row is left."""
    from chalicelib.events import drop

    try:
        record = message.record()
    except MessageError:
        return
    drop.give_up(delivery.settings, record, error)
