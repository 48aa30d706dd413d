"""The messages on Engram's queues, decoded and encoded in one place.

Ingestion queue (``engram-ingest``) bodies are one of:

- an S3 event notification ``{"Records": [{"eventName", "eventTime", "s3": {"bucket": {"name"}, "object": {"key",
  "size", "eTag", "sequencer"}}}, ...]}`` ("Event message structure", Amazon S3 User Guide), also when wrapped in
  an SNS notification ``{"Type": "Notification", "Message": "<that JSON>"}``;
- S3's ``{"Event": "s3:TestEvent", ...}``, sent once when a notification is configured (ignored);
- Engram's own :class:`FileMessage` ``{"type": "ingest.file", "v": 1, "tenant", "vector_store_id", "file_id",
  "version"}``: process an attached file whose ``version`` was already claimed (API attachments, housekeeping
  retries).

Embedding queue (``engram-embed``) bodies are :class:`BatchMessage` ``{"type": "embed.batch", "v": 1, "tenant",
"vector_store_id", "file_id", "version", "batch"}`` — ids only; the chunk texts stay in Postgres (SQS caps a message
at 256 KB). A few hundred bytes each.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chalicelib.events import s3_keys

FILE_MESSAGE = "ingest.file"
BATCH_MESSAGE = "embed.batch"
SCHEMA_VERSION = 1
TEST_EVENT = "s3:TestEvent"
# S3 event names (without the "s3:" prefix) that mean the object's bytes changed or it is gone; other events
# (tagging, ACL, restore, replication) leave the ingested file as it is.
_CREATED = "ObjectCreated:"
_REMOVED = ("ObjectRemoved:", "LifecycleExpiration:")


class MessageError(ValueError):
    """A body that is none of the shapes above (it is reported failed, so it ends in the dead-letter queue)."""


@dataclass(frozen=True, slots=True)
class FileMessage:
    """Process version ``version`` (already claimed) of ``file_id`` in ``vector_store_id``."""

    tenant: str
    vector_store_id: str
    file_id: str
    version: int

    def to_body(self) -> str:
        """The JSON body sent to the ingestion queue."""
        return json.dumps({"type": FILE_MESSAGE, "v": SCHEMA_VERSION, "tenant": self.tenant,
                           "vector_store_id": self.vector_store_id, "file_id": self.file_id,
                           "version": self.version})


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """Embed batch ``batch`` (0-based) of version ``version`` of a file."""

    tenant: str
    vector_store_id: str
    file_id: str
    version: int
    batch: int

    def to_body(self) -> str:
        """The JSON body sent to the embedding queue."""
        return json.dumps({"type": BATCH_MESSAGE, "v": SCHEMA_VERSION, "tenant": self.tenant,
                           "vector_store_id": self.vector_store_id, "file_id": self.file_id,
                           "version": self.version, "batch": self.batch})


@dataclass(frozen=True, slots=True)
class S3Record:
    """One record of an S3 event notification. ``key`` is decoded (:func:`s3_keys.decode`); ``size`` in bytes
    (0 for removals); ``sequencer`` is S3's hex ordering token for the key (absent in moto's events)."""

    event_name: str
    bucket: str
    key: str
    size: int
    etag: str | None
    sequencer: str | None
    event_time: datetime | None

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
        """Identifies this event of the key across duplicate deliveries: ``name|sequencer-or-time|etag``."""
        when = self.sequencer or (self.event_time.isoformat() if self.event_time else "")
        return f"{self.event_name}|{when}|{self.etag or ''}"


@dataclass(frozen=True, slots=True)
class TestEvent:
    """S3's ``s3:TestEvent`` (nothing to do)."""

    bucket: str | None


def decode_ingest(body: str) -> FileMessage | TestEvent | list[S3Record]:
    """Decode an ingestion-queue body.

    Raises:
        MessageError: not JSON, or none of the known shapes.
    """
    data = _json(body)
    if data.get("Type") == "Notification" and isinstance(data.get("Message"), str):
        data = _json(data["Message"])
    if data.get("Event") == TEST_EVENT:
        return TestEvent(bucket=data.get("Bucket"))
    if data.get("type") == FILE_MESSAGE:
        try:
            return FileMessage(tenant=str(data["tenant"]), vector_store_id=str(data["vector_store_id"]),
                               file_id=str(data["file_id"]), version=int(data["version"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"malformed {FILE_MESSAGE} message: {exc}") from None
    if isinstance(data.get("Records"), list):
        return [_s3_record(r) for r in data["Records"]]
    raise MessageError("not an S3 event notification, an s3:TestEvent or an ingest.file message")


def decode_batch(body: str) -> BatchMessage:
    """Decode an embedding-queue body.

    Raises:
        MessageError: not an ``embed.batch`` message.
    """
    data = _json(body)
    if data.get("type") != BATCH_MESSAGE:
        raise MessageError(f"not an {BATCH_MESSAGE} message")
    try:
        return BatchMessage(tenant=str(data["tenant"]), vector_store_id=str(data["vector_store_id"]),
                            file_id=str(data["file_id"]), version=int(data["version"]), batch=int(data["batch"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise MessageError(f"malformed {BATCH_MESSAGE} message: {exc}") from None


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
        raise MessageError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise MessageError("the body is not a JSON object")
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
