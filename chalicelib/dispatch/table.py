"""The message table: every queue and every kind of message, as data.

A queue row says what AWS (``infra/``, which generates every queue, its dead-letter queue and its consumer's role
from it), the local moto stack, the event pump and ``app.py`` must agree on: its name and dead-letter queue, the
setting that names it in a deployment, the Lambda function consuming it, that function's batching, timeout, memory
and AWS access (``.chalice/config.json`` sets the timeout and memory; tests fail when it disagrees). A message
row says which class a kind of message decodes into, which queue carries it, which function handles it and which
records a final failure. Functions and classes are named by dotted path (``module:attribute``) and imported on
first use, so reading the table costs nothing at a Lambda cold start and no module registers itself at import.

Adding a kind of message is one row here plus its handler; adding a queue is one row here plus its
``.chalice/config.json`` entry (and the API role's permission to send to it, in ``infra/template.yaml``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from chalicelib.config import Settings, env_name
from chalicelib.dispatch.port import Delivery, Message
from chalicelib.entrypoints import resolve

__all__ = ["MESSAGES", "QUEUES", "MessageType", "QueueSpec", "handle", "queue", "queue_for"]

logger = logging.getLogger("engram.dispatch")


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One SQS queue and the Lambda function consuming it.

    Attributes:
        role: short name (``ingest``, ``embed``) used by the local stack and the CLI (``engram redrive --queue``).
        name: the queue's name in AWS and in the local stack; ``dlq`` its dead-letter queue's. A stack deployed
            as ``engram`` names them exactly so (``infra/`` builds ``<stack>-<role>`` and ``<stack>-<role>-dlq``).
        setting: the :class:`~chalicelib.config.Settings` field holding its name or URL in a deployment.
        function: the ``app.py`` handler (one Lambda function) that consumes it.
        batch_size: records per invocation; ``batching_window_s`` seconds Lambda may wait to fill a batch.
        timeout_s: the consumer's Lambda timeout, seconds (``.chalice/config.json`` ``lambda_timeout`` must equal
            it); the queue's visibility timeout is six times it (AWS: "Configuring an Amazon SQS queue to use
            with Lambda").
        memory_mb: the consumer's memory, MB (``lambda_memory_size``).
        max_concurrency: at most this many concurrent invocations (the event source mapping's
            ``ScalingConfig.MaximumConcurrency``): bounds database connections and model throttling.
        needs: AWS access beyond consuming its queue and the database, as ``infra/`` grants it: ``read_bucket``
            (read and list the drop bucket), ``queue:<role>`` (send to that queue), ``embedding_model`` (invoke
            the embedding model), ``models`` (invoke the embedding and chat models, streaming too).
        s3_events: the drop bucket's notifications arrive on this queue too.
        parses: its consumer parses documents (:mod:`chalicelib.ingest.parse`), so ``infra/`` gives it the
            parsers' dependency layer; every other function goes without (issue 16: ≤ 50 MB per function).
    """

    role: str
    name: str
    dlq: str
    setting: str
    function: str
    batch_size: int
    timeout_s: int
    memory_mb: int
    batching_window_s: int = 0
    max_concurrency: int = 10
    needs: frozenset[str] = frozenset()
    s3_events: bool = False
    parses: bool = False

    @property
    def env(self) -> str:
        """The environment variable naming the queue in a deployment (e.g. ``ENGRAM_INGEST_QUEUE``)."""
        return env_name(self.setting)

    def configured(self, settings: Settings) -> str | None:
        """The queue's name or URL in ``settings`` (None: not deployed with this queue)."""
        return getattr(settings, self.setting)


QUEUES: tuple[QueueSpec, ...] = (
    QueueSpec(role="ingest", name="engram-ingest", dlq="engram-ingest-dlq", setting="ingest_queue",
              function="ingest", batch_size=10, batching_window_s=1, timeout_s=300, memory_mb=2048,
              needs=frozenset({"read_bucket", "queue:embed"}), s3_events=True, parses=True),
    QueueSpec(role="embed", name="engram-embed", dlq="engram-embed-dlq", setting="embed_queue",
              function="embed", batch_size=4, timeout_s=120, memory_mb=1024,
              needs=frozenset({"read_bucket", "embedding_model"})),
    # Asynchronous memory adds: each makes up to four model calls (seconds each, more with retries), so few per
    # invocation and a timeout that outlasts a slow model.
    QueueSpec(role="memory", name="engram-memory", dlq="engram-memory-dlq", setting="memory_queue",
              function="memory", batch_size=2, timeout_s=300, memory_mb=1024, needs=frozenset({"models"})),
)


@dataclass(frozen=True, slots=True)
class MessageType:
    """One kind of message: ``kind`` (the body's ``type``), its dataclass, the queue ``role`` carrying it, the
    ``handler`` (``(message, Delivery) -> str`` outcome) and ``give_up`` (``(message, Delivery, error) -> None``,
    called when the last allowed delivery failed, before the message goes to the dead-letter queue)."""

    kind: str
    message: str
    queue: str
    handler: str
    give_up: str

    def message_class(self) -> type[Message]:
        """The message's dataclass."""
        return resolve(self.message)


MESSAGES: dict[str, MessageType] = {row.kind: row for row in (
    MessageType(kind="ingest.file", message="chalicelib.ingest.messages:FileMessage", queue="ingest",
                handler="chalicelib.ingest.engine:handle_file", give_up="chalicelib.ingest.engine:give_up"),
    MessageType(kind="embed.batch", message="chalicelib.ingest.messages:BatchMessage", queue="embed",
                handler="chalicelib.ingest.engine:handle_batch", give_up="chalicelib.ingest.engine:give_up"),
    MessageType(kind="drop.object", message="chalicelib.events.synced:ObjectMessage", queue="ingest",
                handler="chalicelib.events.synced:handle_object", give_up="chalicelib.events.synced:give_up_object"),
    MessageType(kind="memory.add", message="chalicelib.memory:AddJobMessage", queue="memory",
                handler="chalicelib.memory:handle_add_job", give_up="chalicelib.memory:give_up_add_job"),
    # A step of a store's move between vector backends, run where the backends' engines are held (the stack).
    MessageType(kind="vector_store.move", message="chalicelib.search.backends.reindex:MoveMessage", queue="ingest",
                handler="chalicelib.search.backends.reindex:handle_move",
                give_up="chalicelib.search.backends.reindex:give_up_move"),
)}


def queue(role: str) -> QueueSpec:
    """The queue with ``role`` (``ingest``, ``embed``).

    Raises:
        KeyError: no such queue.
    """
    for spec in QUEUES:
        if spec.role == role:
            return spec
    raise KeyError(role)


def queue_for(kind: str) -> QueueSpec:
    """The queue that carries messages of ``kind``.

    Raises:
        KeyError: an unknown kind.
    """
    return queue(MESSAGES[kind].queue)


def handle(message: Message, delivery: Delivery) -> str:
    """Run ``message``'s handler; returns its outcome. When the handler raises on the last allowed delivery, its
    ``give_up`` records the failure first, then the error propagates (SQS moves the message to the dead-letter
    queue; an in-process dispatcher logs it).

    Raises:
        whatever the handler raises.
    """
    entry = MESSAGES[message.kind]
    handler: Callable[[Message, Delivery], str] = resolve(entry.handler)
    try:
        return handler(message, delivery)
    except Exception as exc:
        if delivery.last_attempt:
            try:
                resolve(entry.give_up)(message, delivery, exc)
            except Exception:  # the original error is what matters; this one is logged
                logger.exception("recording the failure of %s failed", message)
        raise
