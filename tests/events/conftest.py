"""The serverless ingestion path under moto (in-process ``mock_aws``): a bucket whose notification feeds the
ingestion queue, both queues with dead-letter queues and redrive policies as deployed, and a small test pump that
receives real messages, hands them to the real Chalice handlers (``app.ingest`` / ``app.embed``) as Lambda SQS
events (``engram_cli.local.events.sqs_event``), deletes what succeeded and makes failed records visible again at
once (as if their visibility timeout had passed)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from chalicelib import aws, deps
from chalicelib.dispatch.table import queue

INGEST_QUEUE, INGEST_DLQ = queue("ingest").name, queue("ingest").dlq
EMBED_QUEUE, EMBED_DLQ = queue("embed").name, queue("embed").dlq

BUCKET = "engram-drop"
REGION = "us-east-1"
TENANTS = ("acme", "beta")
MAX_RECEIVES = 3


@dataclasses.dataclass
class Delivery:
    """One handler invocation: the queue, the event's records and the handler's answer."""

    queue: str
    event: dict[str, Any]
    response: dict[str, Any]

    @property
    def failed_ids(self) -> list[str]:
        return [f["itemIdentifier"] for f in self.response.get("batchItemFailures", [])]


class Harness:
    """Queues, bucket and a deterministic pump over the real handlers."""

    def __init__(self, settings, sqs, s3) -> None:
        self.settings, self.sqs, self.s3 = settings, sqs, s3
        self.urls: dict[str, str] = {}
        self.arns: dict[str, str] = {}
        self.deliveries: list[Delivery] = []
        self.sent_bodies: dict[str, list[str]] = {INGEST_QUEUE: [], EMBED_QUEUE: []}
        self.after_each: Callable[[], None] | None = None

    def create(self) -> None:
        for name in (INGEST_DLQ, EMBED_DLQ):
            self._queue(name, {})
        for name, dlq in ((INGEST_QUEUE, INGEST_DLQ), (EMBED_QUEUE, EMBED_DLQ)):
            policy = json.dumps({"deadLetterTargetArn": self.arns[dlq], "maxReceiveCount": MAX_RECEIVES})
            self._queue(name, {"RedrivePolicy": policy, "VisibilityTimeout": "30"})
        self.s3.create_bucket(Bucket=BUCKET)
        self.s3.put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": self.arns[INGEST_QUEUE],
                                     "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}]})

    def _queue(self, name: str, attributes: dict[str, str]) -> None:
        url = self.sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        self.urls[name] = url
        self.arns[name] = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]

    def receive(self, queue: str, limit: int = 10) -> list[dict[str, Any]]:
        return self.sqs.receive_message(QueueUrl=self.urls[queue], MaxNumberOfMessages=limit, WaitTimeSeconds=0,
                                        AttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])

    def deliver(self, queue: str, messages: list[dict[str, Any]]) -> Delivery:
        """Invoke the queue's handler with these received messages; delete the successes, make failures visible."""
        import app
        from engram_cli.local.events import sqs_event

        event = sqs_event(messages, self.arns[queue], REGION)
        handler = app.ingest if queue == INGEST_QUEUE else app.embed
        response = handler(event, None)
        delivery = Delivery(queue, event, response)
        self.deliveries.append(delivery)
        failed = set(delivery.failed_ids)
        for message in messages:
            if message["MessageId"] in failed:
                self.sqs.change_message_visibility(QueueUrl=self.urls[queue], ReceiptHandle=message["ReceiptHandle"],
                                                   VisibilityTimeout=0)
            else:
                self.sent_bodies[queue].append(message["Body"])
                self.sqs.delete_message(QueueUrl=self.urls[queue], ReceiptHandle=message["ReceiptHandle"])
        if self.after_each is not None:
            self.after_each()
        return delivery

    def drain(self, max_rounds: int = 500) -> list[Delivery]:
        """Deliver until both queues are empty (ingestion first, then embedding, like two consumers)."""
        done = []
        for _ in range(max_rounds):
            moved = False
            for name, size in ((INGEST_QUEUE, 10), (EMBED_QUEUE, 4)):
                messages = self.receive(name, size)
                if messages:
                    done.append(self.deliver(name, messages))
                    moved = True
            if not moved:
                return done
        raise AssertionError("queues did not drain")

    def depth(self, queue: str) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.urls[queue], AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def send(self, queue: str, body: str) -> None:
        self.sqs.send_message(QueueUrl=self.urls[queue], MessageBody=body)

    def put(self, key: str, data: bytes) -> str:
        """Put an object; returns its ETag (no quotes)."""
        return self.s3.put_object(Bucket=BUCKET, Key=key, Body=data)["ETag"].strip('"')

    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=BUCKET, Key=key)

    def redrive(self, dlq: str, source: str) -> int:
        """What ``engram redrive`` does: move every DLQ message back to its source queue, body unchanged."""
        moved = 0
        while True:
            messages = self.receive(dlq)
            if not messages:
                return moved
            for message in messages:
                self.send(source, message["Body"])
                self.sqs.delete_message(QueueUrl=self.urls[dlq], ReceiptHandle=message["ReceiptHandle"])
                moved += 1


@pytest.fixture(scope="module")
def aws_env():
    """Dummy credentials and region for moto, set for the module."""
    patch = pytest.MonkeyPatch()
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", REGION)):
        patch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS", "AWS_PROFILE"):
        patch.delenv(name, raising=False)
    yield
    patch.undo()


@pytest.fixture(scope="module")
def pipeline_settings(settings):
    """The module's settings with the bucket and queues set (small batches, so files span several)."""
    return dataclasses.replace(settings, bucket=BUCKET, ingest_queue=INGEST_QUEUE, embed_queue=EMBED_QUEUE,
                               embed_batch_chunks=4, max_receives=MAX_RECEIVES, aws_region=REGION)


@pytest.fixture(scope="module")
def tenants(pipeline_settings):
    """The tenants drops may name."""
    from chalicelib.store.db import connect
    from chalicelib.store.vector_stores import ensure_tenant

    with connect(pipeline_settings) as conn:
        for tenant in TENANTS:
            ensure_tenant(conn, tenant)
    return TENANTS


@pytest.fixture()
def harness(aws_env, pipeline_settings, tenants, hashing_embedder):
    """A fresh moto world (bucket, queues, notification) and the process wired to it; the hashing embedder."""
    from moto import mock_aws

    from chalicelib.store.db import close_pools

    with mock_aws():
        aws.reset()
        deps.set_settings(pipeline_settings)
        deps.set_embedder(hashing_embedder)
        h = Harness(pipeline_settings, boto3.client("sqs", region_name=REGION),
                    boto3.client("s3", region_name=REGION))
        h.create()
        try:
            yield h
        finally:
            deps.reset()
            aws.reset()
            close_pools()
