"""The local event pump: what Lambda's SQS event source mappings and EventBridge schedules do, for one machine.

For every ``@app.on_sqs_message`` source of a Chalice app it runs ``workers`` pollers. Each long-polls the queue,
gathers up to ``batch_size`` messages (waiting at most ``maximum_batching_window_in_seconds`` once the first has
arrived), invokes the SAME handler object the deployment runs with a real Lambda SQS event and a Lambda-like context,
then deletes the records that succeeded. Records named in the handler's ``batchItemFailures`` — or every record when
the handler raises or answers an invalid identifier — are left alone: they reappear after the queue's visibility
timeout, and the queue's redrive policy moves them to the dead-letter queue after ``maxReceiveCount`` receives
("Handling errors for an SQS event source in Lambda", https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
Every ``@app.schedule`` with a ``rate(...)`` expression fires at its rate (first one period after start, as a new
EventBridge rule does), optionally sped up for tests.

Not emulated: the function timeout (a handler runs to completion), the 6 MB invocation payload cap, the retries of
asynchronous (scheduled) invocations, and ``cron(...)`` schedules (logged and skipped).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import boto3
from chalice.app import Chalice, ScheduledEventConfig, SQSEventConfig

from engram_cli.local.events import LOCAL_ACCOUNT_ID, rule_arn, schedule_event, sqs_event
from engram_cli.local.functions import FunctionSettings

logger = logging.getLogger("engram.pump")

MAX_RECEIVE = 10  # SQS ReceiveMessage returns at most 10 messages per call
MAX_WAIT_S = 20  # SQS's longest long poll (WaitTimeSeconds)
DEFAULT_WAIT_S = 2  # the pump's long poll: also how long stop() may wait for an idle poller
DELETE_BATCH = 10  # DeleteMessageBatch takes at most 10 entries
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86400}


def rate_seconds(expression: Any) -> float | None:
    """Seconds between runs of a schedule expression (``"rate(5 minutes)"`` or a :class:`chalice.app.Rate`); None for
    ``cron(...)``, which the pump does not run. Syntax: EventBridge "Schedule expressions for rules".

    Raises:
        ValueError: a malformed ``rate(...)`` expression.
    """
    text = expression if isinstance(expression, str) else expression.to_string()
    if text.startswith("cron("):
        return None
    match = _RATE.match(text.strip())
    if match is None:
        raise ValueError(f"not a schedule expression: {text!r}")
    return int(match.group(1)) * _UNIT_S[match.group(2).rstrip("s")]


class LambdaContext:
    """The context object a Python Lambda handler receives (fields of "Using the Lambda context object to retrieve
    Python function information", https://docs.aws.amazon.com/lambda/latest/dg/python-context.html)."""

    def __init__(self, function_name: str, region: str, timeout_s: float, memory_mb: int = 128) -> None:
        import uuid

        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:{LOCAL_ACCOUNT_ID}:function:{function_name}"
        self.memory_limit_in_mb = memory_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_s

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the (nominal) function timeout; never negative."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


@dataclass
class PumpStats:
    """Counters since start: ``invocations`` (SQS handler calls), ``succeeded`` / ``failed`` (records deleted / left
    for redelivery), ``errors`` (handler calls that raised), ``scheduled`` (schedule handler calls)."""

    invocations: int = 0
    succeeded: int = 0
    failed: int = 0
    errors: int = 0
    scheduled: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        """Add to the named counters (thread-safe)."""
        with self.lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)


def failed_ids(result: Any, message_ids: list[str]) -> set[str]:
    """The message ids a handler's return value reports as failed (partial batch response).

    A None / empty / non-dict result or an empty ``batchItemFailures`` is full success. An item whose
    ``itemIdentifier`` is missing, empty or not in the batch makes the whole batch a failure, as Lambda does
    ("Implementing partial batch responses", https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
    """
    if not isinstance(result, dict) or not result.get("batchItemFailures"):
        return set()
    failures, ids = result["batchItemFailures"], set(message_ids)
    if not isinstance(failures, list):
        return ids
    reported: set[str] = set()
    for item in failures:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or identifier not in ids:
            return ids
        reported.add(identifier)
    return reported


class Pump:
    """Feeds ``app``'s SQS handlers from their queues and fires its rate schedules until :meth:`stop`.

    Args:
        app: the Chalice app (its ``event_sources`` and ``handler_map``).
        queue_urls: queue name → URL (e.g. ``StackState.queues``); queues not listed are looked up by name.
        endpoint: the AWS endpoint (moto) or None for boto3's default resolution.
        workers: concurrent pollers per SQS source (capped by the source's ``maximum_concurrency``).
        wait_s: long-poll seconds per ReceiveMessage (1-20); an idle poller notices :meth:`stop` within this.
        schedule_speedup: divide every schedule's period by this (tests: e.g. 600 makes ``rate(5 minutes)`` 0.5 s).
        functions: the stage and per-handler timeouts the context reports (default: Chalice's, ``dev`` and 60 s).
    """

    def __init__(self, app: Chalice, *, region: str, queue_urls: dict[str, str] | None = None,
                 endpoint: str | None = None, workers: int = 1, wait_s: int = DEFAULT_WAIT_S,
                 schedule_speedup: float = 1.0, functions: FunctionSettings | None = None) -> None:
        self._app, self._region, self._endpoint = app, region, endpoint
        self._queue_urls = dict(queue_urls or {})
        self._workers = max(1, workers)
        self._wait_s = min(MAX_WAIT_S, max(1, int(wait_s)))
        self._speedup = schedule_speedup
        self._functions = functions or FunctionSettings()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self.stats = PumpStats()

    # --- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> Pump:
        """Resolve every SQS source's queue and start the pollers and the scheduler; returns self.

        Raises:
            botocore.exceptions.ClientError: a source's queue does not exist.
        """
        sqs = self._client()
        for source in self.sqs_sources():
            url = self._resolve_url(sqs, source)
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            count = min(self._workers, source.maximum_concurrency or self._workers)
            for i in range(count):
                self._spawn(f"pump-{source.name}-{i}", self._poll_loop, source, url, arn)
        schedules = [(s, rate_seconds(s.schedule_expression)) for s in self.schedules()]
        for schedule, period in schedules:
            if period is None:
                logger.warning("schedule %s (%s) is a cron expression: not run locally", schedule.name,
                               schedule.schedule_expression)
        runnable = [(s, p / self._speedup) for s, p in schedules if p is not None]
        if runnable:
            self._spawn("pump-schedules", self._schedule_loop, runnable)
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop polling; each poller finishes the batch in hand (its records are then deleted or left as usual).
        Waits up to ``timeout_s`` seconds per thread (default: the long-poll time plus 30 s)."""
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout_s if timeout_s is not None else self._wait_s + 30)

    def sqs_sources(self) -> list[SQSEventConfig]:
        """The app's ``@app.on_sqs_message`` sources."""
        return [s for s in self._app.event_sources if isinstance(s, SQSEventConfig)]

    def schedules(self) -> list[ScheduledEventConfig]:
        """The app's ``@app.schedule`` sources."""
        return [s for s in self._app.event_sources if isinstance(s, ScheduledEventConfig)]

    def fire(self, name: str) -> Any:
        """Invoke the schedule handler ``name`` once now with a Scheduled Event; returns what it returns.

        Raises:
            KeyError: no schedule of that name. Whatever the handler raises.
        """
        source = next((s for s in self.schedules() if s.name == name), None)
        if source is None:
            raise KeyError(name)
        event = schedule_event(rule_arn(self._function_name(name), self._region), self._region)
        self.stats.add(scheduled=1)
        return self._app.handler_map[name](event, self._context(name))

    # --- SQS ---------------------------------------------------------------------------------------------------

    def _poll_loop(self, source: SQSEventConfig, url: str, arn: str) -> None:
        sqs = self._client()  # one client per thread
        handler = self._app.handler_map[source.name]
        while not self._stopping.is_set():
            try:
                messages = self._receive_batch(sqs, url, source)
                if messages:
                    self._invoke(sqs, url, arn, source, handler, messages)
            except Exception:  # a broken endpoint must not kill the poller; back off and retry
                logger.exception("pump %s: polling %s failed", source.name, url)
                self._stopping.wait(1.0)

    def _receive_batch(self, sqs: Any, url: str, source: SQSEventConfig) -> list[dict[str, Any]]:
        """Up to ``batch_size`` messages: one long poll, then (with a batching window) more receives until the batch
        is full or the window, counted from the first message, has passed."""
        batch: list[dict[str, Any]] = []
        window_s = source.maximum_batching_window_in_seconds or 0
        deadline = None
        while len(batch) < source.batch_size and not self._stopping.is_set():
            if deadline is None:
                wait = self._wait_s
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                wait = max(0, min(MAX_WAIT_S, int(remaining + 0.999)))
            wanted = min(MAX_RECEIVE, source.batch_size - len(batch))
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=wanted,
                                      WaitTimeSeconds=wait, AttributeNames=["All"],
                                      MessageAttributeNames=["All"]).get("Messages", [])
            # A visibility timeout shorter than the window (AWS refuses that configuration) could hand a message out
            # twice: keep one copy, with the newest receipt handle.
            fresh = {m["MessageId"]: m for m in got}
            batch = [fresh.pop(m["MessageId"], m) for m in batch] + list(fresh.values())
            if not batch:
                return batch  # idle: back to the loop (checks stop)
            if window_s <= 0:
                break
            if deadline is None:
                deadline = time.monotonic() + window_s
        return batch

    def _invoke(self, sqs: Any, url: str, arn: str, source: SQSEventConfig, handler: Any,
                messages: list[dict[str, Any]]) -> None:
        ids = [m["MessageId"] for m in messages]
        try:
            result = handler(sqs_event(messages, arn, self._region), self._context(source.name))
            failed = failed_ids(result, ids)
        except Exception:
            logger.exception("handler %s raised: the %d records of its batch return to %s", source.name, len(ids),
                             url)
            failed = set(ids)
            self.stats.add(errors=1)
        done = [m for m in messages if m["MessageId"] not in failed]
        for i in range(0, len(done), DELETE_BATCH):
            entries = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                       for n, m in enumerate(done[i:i + DELETE_BATCH])]
            response = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
            for error in response.get("Failed", []):
                logger.warning("pump %s: could not delete a message: %s", source.name, error)
        self.stats.add(invocations=1, succeeded=len(done), failed=len(failed))

    # --- schedules ---------------------------------------------------------------------------------------------

    def _schedule_loop(self, schedules: list[tuple[ScheduledEventConfig, float]]) -> None:
        due = {s.name: time.monotonic() + period for s, period in schedules}
        while not self._stopping.is_set():
            now = time.monotonic()
            for source, period in schedules:
                if now >= due[source.name]:
                    due[source.name] = max(due[source.name] + period, now)  # skip runs missed while busy
                    try:
                        self.fire(source.name)
                    except Exception:
                        logger.exception("schedule %s raised", source.name)
            self._stopping.wait(max(0.01, min(due.values()) - time.monotonic()))

    # --- helpers -----------------------------------------------------------------------------------------------

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _client(self) -> Any:
        from engram_cli.local.stack import credentials

        return boto3.client("sqs", region_name=self._region, endpoint_url=self._endpoint,
                            **(credentials() if self._endpoint else {}))

    def _resolve_url(self, sqs: Any, source: SQSEventConfig) -> str:
        name = source.queue or (source.queue_arn or "").rsplit(":", 1)[-1]  # Chalice requires one of them
        return self._queue_urls.get(name) or sqs.get_queue_url(QueueName=name)["QueueUrl"]

    def _function_name(self, handler_name: str) -> str:
        return f"{self._app.app_name}-{self._functions.stage}-{handler_name}"

    def _context(self, handler_name: str) -> LambdaContext:
        return LambdaContext(self._function_name(handler_name), self._region,
                             self._functions.timeout_s(handler_name))
