"""``engram redrive``: move the messages of a dead-letter queue back to its source queue, body and message attributes
unchanged, so the handlers see them again (a fresh receive count). Works against the local stack and real AWS: the
DLQ is found from the source queue's ``RedrivePolicy``.

SQS's own ``StartMessageMoveTask`` does the same on AWS asynchronously; moto does not implement it, and a
receive → send → delete loop gives the same result in both places with a count to report.
"""

from __future__ import annotations

import json
from typing import Any

RECEIVE_MAX = 10  # SQS ReceiveMessage / SendMessageBatch / DeleteMessageBatch take at most 10
WAIT_S = 1  # long poll per receive, so a sampled short poll cannot end the loop while messages remain
HOLD_S = 60  # visibility timeout while a message is being moved, seconds


def queue_url(sqs: Any, name_or_url: str) -> str:
    """The URL of a queue given by name or URL."""
    if name_or_url.startswith(("https://", "http://")):
        return name_or_url
    return sqs.get_queue_url(QueueName=name_or_url)["QueueUrl"]


def dead_letter_url(sqs: Any, source_url: str) -> str:
    """The URL of ``source_url``'s dead-letter queue (its ``RedrivePolicy.deadLetterTargetArn``).

    Raises:
        ValueError: the queue has no redrive policy.
    """
    attrs = sqs.get_queue_attributes(QueueUrl=source_url, AttributeNames=["RedrivePolicy"]).get("Attributes", {})
    if "RedrivePolicy" not in attrs:
        raise ValueError(f"queue {source_url} has no dead-letter queue (no RedrivePolicy)")
    arn = json.loads(attrs["RedrivePolicy"])["deadLetterTargetArn"]
    account, name = arn.split(":")[4:6]
    return sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]


def _sendable(attributes: dict[str, Any]) -> dict[str, Any]:
    """Received message attributes in SendMessage's form (the unimplemented list fields dropped)."""
    return {name: {k: v for k, v in value.items() if k in ("DataType", "StringValue", "BinaryValue")}
            for name, value in attributes.items()}


def redrive(sqs: Any, source_url: str, dlq_url: str | None = None) -> int:
    """Move every message of ``dlq_url`` (default: ``source_url``'s DLQ) to ``source_url``; returns how many moved.
    A message is deleted from the DLQ only after its send succeeded.

    Raises:
        ValueError: no DLQ given and the source queue has none.
        botocore.exceptions.ClientError: an SQS call failed.
    """
    dlq_url = dlq_url or dead_letter_url(sqs, source_url)
    moved = 0
    while True:
        messages = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=RECEIVE_MAX, WaitTimeSeconds=WAIT_S,
                                       VisibilityTimeout=HOLD_S, MessageAttributeNames=["All"]).get("Messages", [])
        if not messages:
            return moved
        entries = [{"Id": str(i), "MessageBody": m["Body"],
                    "MessageAttributes": _sendable(m.get("MessageAttributes", {}))}
                   for i, m in enumerate(messages)]
        sent = sqs.send_message_batch(QueueUrl=source_url, Entries=entries).get("Successful", [])
        done = [messages[int(s["Id"])] for s in sent]
        if done:
            sqs.delete_message_batch(QueueUrl=dlq_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)])
        moved += len(done)
        if len(done) < len(messages):  # some sends failed: stop rather than spin on them
            return moved
