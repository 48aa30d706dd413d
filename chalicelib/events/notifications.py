"""S3 event notifications, as they arrive on the ingestion queue next to Engram's own messages
(:mod:`chalicelib.dispatch`):

- an S3 event notification ``{"Records": [{"eventName", "eventTime", "s3": {"bucket": {"name"}, "object": {"key",
  "size", "eTag", "sequencer"}}}, ...]}`` ("Event message structure", Amazon S3 User Guide), also when wrapped in
  an SNS notification ``{"Type": "Notification", "Message": "<that JSON>"}``;
- S3's ``{"Event": "s3:TestEvent", ...}``, sent once when a notification is configured (ignored).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.dispatch.port import MessageError
from chalicelib.events import s3_keys

TEST_EVENT = "s3:TestEvent"
# S3 event names (without the "s3:" prefix) that mean the object's bytes changed or it is gone; other events
# (tagging, ACL, restore, replication) leave the ingested file as it is.
_CREATED = "ObjectCreated:"
_REMOVED = ("ObjectRemoved:", "LifecycleExpiration:")


@dataclass(frozen=True, slots=True)
class S3Record:
    """One record of an S3 event notification. ``key`` is decoded (:func:`s3_keys.decode`); ``size`` in bytes
    (0 for removals); ``sequencer`` is S3's hex ordering token for the key (absent in moto's events).

    ``synced``: not delivered by S3 but made by a drop-folder sync (:mod:`chalicelib.events.synced`) from what a
    HEAD of the object found; ``event_time`` is then the moment just before that HEAD and ``sequencer`` is None.
    """

    event_name: str
    bucket: str
    key: str
    size: int
    etag: str | None
    sequencer: str | None
    event_time: datetime | None
    synced: bool = False

    @property
    def is_created(self) -> bool:
        """The object was written (put, post, copy, multipart upload): its bytes are (re-)ingested."""
        return self.event_name.startswith(_CREATED)

    @property
    def is_removed(self) -> bool:
        """The object was deleted (or a delete marker / lifecycle expiration hid it)."""
        return self.event_name.startswith(_REMOVED)

    @property
    def event_id(self) -> str:
        """Identifies this event of the key across duplicate deliveries: ``name|sequencer-or-time|etag``; a synced
        record ``name|etag`` (every sync that finds the same object names the same event)."""
        if self.synced:
            return f"{self.event_name}|{self.etag or ''}"
        when = self.sequencer or (self.event_time.isoformat() if self.event_time else "")
        return f"{self.event_name}|{when}|{self.etag or ''}"


@dataclass(frozen=True, slots=True)
class TestEvent:
    """S3's ``s3:TestEvent`` (nothing to do)."""

    bucket: str | None


def decode(data: dict[str, Any]) -> TestEvent | list[S3Record] | None:
    """The S3 notification a parsed body holds (unwrapping SNS), or None when it is not one (then it is one of
    Engram's own messages).

    Raises:
        MessageError: a notification whose records are malformed.
    """
    if data.get("Type") == "Notification" and isinstance(data.get("Message"), str):
        data = _json(data["Message"])
    if data.get("Event") == TEST_EVENT:
        return TestEvent(bucket=data.get("Bucket"))
    if isinstance(data.get("Records"), list):
        return [_s3_record(r) for r in data["Records"]]
    return None


def compare_sequencers(a: str, b: str) -> int:
    """-1, 0 or 1 as S3 sequencer ``a`` is older than, the same as or newer than ``b`` (same key only). AWS:
    "The sequencers can be different lengths. To compare these values, right-pad the shorter value with zeros,
    and then do a lexicographical comparison" (re:Post Knowledge Center, "duplicate messages in Amazon SQS for
    the same Amazon S3 event")."""
    width = max(len(a), len(b))
    left, right = a.upper().ljust(width, "0"), b.upper().ljust(width, "0")
    return (left > right) - (left < right)


def _json(body: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        raise MessageError("the SNS message is not JSON") from None
    if not isinstance(data, dict):
        raise MessageError("the SNS message is not a JSON object")
    return data


def _s3_record(record: Any) -> S3Record:
    try:
        s3 = record["s3"]
        obj = s3["object"]
        when = record.get("eventTime")
        return S3Record(event_name=str(record["eventName"]).removeprefix("s3:"), bucket=str(s3["bucket"]["name"]),
                        key=s3_keys.decode(str(obj["key"])), size=int(obj.get("size") or 0),
                        etag=(str(obj["eTag"]).strip('"') or None) if obj.get("eTag") else None,
                        sequencer=str(obj["sequencer"]) if obj.get("sequencer") else None,
                        event_time=datetime.fromisoformat(when.replace("Z", "+00:00")) if when else None)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MessageError(f"malformed S3 event record: {exc!r}") from None
