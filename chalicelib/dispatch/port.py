"""The port's types: :class:`Message` (and its JSON body), :class:`Delivery` (how a message reached its handler)
and :class:`Dispatcher` (where messages go)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol

from chalicelib.config import Settings

__all__ = ["SCHEMA_VERSION", "Delivery", "Dispatcher", "Message", "MessageError", "decode", "encode"]

# The ``v`` of every body Engram writes; a reader refuses bodies of another version.
SCHEMA_VERSION = 1


class MessageError(ValueError):
    """A body that is no known message (reported failed, so it ends in the dead-letter queue)."""


@dataclass(frozen=True, slots=True)
class Message:
    """Base of Engram's messages: frozen dataclasses of ids (never payloads: SQS caps a message at 256 KB) whose
    class attribute ``kind`` (e.g. ``"ingest.file"``) names their row in the message table. ``tenant`` scopes the
    work: handlers open a tenant connection (row-level security) for it."""

    kind: ClassVar[str] = ""
    tenant: str


def encode(message: Message) -> str:
    """The JSON body of ``message``: ``{"type": kind, "v": 1, <fields>}``."""
    return json.dumps({"type": message.kind, "v": SCHEMA_VERSION, **dataclasses.asdict(message)})


def decode(body: str | dict[str, Any]) -> Message:
    """The message a JSON body (or its parsed object) holds, of the class its ``type`` names in the message table.

    Raises:
        MessageError: not JSON, an unknown ``type`` or ``v``, or fields missing or of the wrong kind.
    """
    from chalicelib.dispatch import table

    data = body if isinstance(body, dict) else _json(body)
    kind = data.get("type")
    entry = table.MESSAGES.get(kind) if isinstance(kind, str) else None
    if not isinstance(kind, str) or entry is None:
        raise MessageError(f"unknown message type {kind!r}")
    if data.get("v", SCHEMA_VERSION) != SCHEMA_VERSION:
        raise MessageError(f"{kind} message of unsupported version {data.get('v')!r}")
    cls = entry.message_class()
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):
        if spec.name not in data:
            raise MessageError(f"malformed {kind} message: missing {spec.name!r}")
        values[spec.name] = _coerce(kind, spec.name, data[spec.name], str(spec.type))
    return cls(**values)


def _coerce(kind: str, name: str, value: Any, annotation: str) -> Any:
    try:
        if annotation == "int":
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if annotation == "str":
            if not isinstance(value, str):
                raise ValueError(value)
            return value
    except (TypeError, ValueError):
        raise MessageError(f"malformed {kind} message: {name!r} is not an {annotation}") from None
    return value


def _json(body: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        raise MessageError("the body is not JSON") from None
    if not isinstance(data, dict):
        raise MessageError("the body is not a JSON object")
    return data


@dataclass(frozen=True, slots=True)
class Delivery:
    """How a message reached its handler.

    Attributes:
        settings: the process's settings.
        dispatcher: where the handler sends follow-up messages (the same mode it was delivered by: an inline
            delivery keeps its follow-ups inline).
        arrived_at: when the message was first received (SQS ``ApproximateFirstReceiveTimestamp``), None in-process.
        last_attempt: a failure now is final (the SQS receive count reached ``max_receives``, or an in-process
            delivery, which is never retried): the handler's ``give_up`` records it.
        inline: the caller waits for the work (an attach small enough to finish inside its request).
        deadline: for an inline delivery, when the caller stops waiting (``time.monotonic()`` seconds; None: it
            waits for everything): work the embedder's measured rate does not fit before it goes to ``overflow``.
        overflow: where an inline delivery sends the work that does not fit before ``deadline`` (the process's
            own dispatcher: SQS, or background threads).
    """

    settings: Settings
    dispatcher: Dispatcher
    arrived_at: datetime | None = None
    last_attempt: bool = True
    inline: bool = False
    deadline: float | None = None
    overflow: Dispatcher | None = None


class Dispatcher(Protocol):
    """Where messages go. ``durable``: sent messages survive this process (SQS); an in-process dispatcher loses
    what it holds when the process dies, so housekeeping re-sends stalled work after one lease instead of hours."""

    durable: bool

    def send(self, messages: Sequence[Message]) -> None:
        """Hand ``messages`` over for processing (returns before they are processed, except inline).

        Raises:
            UpstreamError: the queue refused or failed (nothing is known to be sent).
            ConfigurationError: a message's queue is not configured.
        """
        ...
