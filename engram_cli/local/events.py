"""Lambda event payloads built from what the AWS APIs return, so the local pump hands handlers exactly what the
Lambda service would.

Shapes:
- SQS: "Using Lambda with Amazon SQS — Example standard queue message event",
  https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html (record fields ``messageId``, ``receiptHandle``,
  ``body``, ``attributes``, ``messageAttributes``, ``md5OfBody``, ``md5OfMessageAttributes``, ``eventSource``,
  ``eventSourceARN``, ``awsRegion``).
- Schedules: "Invoke a Lambda function on a schedule" / EventBridge "Scheduled Event",
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-run-lambda-schedule.html and
  https://docs.aws.amazon.com/lambda/latest/dg/with-eventbridge-scheduler.html.
"""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime
from typing import Any

# The account moto uses unless told otherwise (moto.core.DEFAULT_ACCOUNT_ID); only ever part of ARNs here.
LOCAL_ACCOUNT_ID = "123456789012"


def _b64(value: bytes | str) -> str:
    return base64.b64encode(value if isinstance(value, bytes) else value.encode()).decode()


def _message_attribute(value: dict[str, Any]) -> dict[str, Any]:
    """One boto3 ``MessageAttributes`` value (``StringValue``/``BinaryValue`` bytes/..., ``DataType``) in Lambda's
    form (camelCase keys, binary values base64-encoded, both list fields always present)."""
    out: dict[str, Any] = {}
    if "StringValue" in value:
        out["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        out["binaryValue"] = _b64(value["BinaryValue"])
    out["stringListValues"] = list(value.get("StringListValues", []))
    out["binaryListValues"] = [_b64(v) for v in value.get("BinaryListValues", [])]
    out["dataType"] = value["DataType"]
    return out


def sqs_record(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """The Lambda record for one boto3 ``receive_message`` message (received with ``AttributeNames=["All"]`` and
    ``MessageAttributeNames=["All"]``). System attributes (``ApproximateReceiveCount``, ``SentTimestamp`` in epoch
    milliseconds, ``SenderId``, ``ApproximateFirstReceiveTimestamp``, FIFO and trace fields) pass through as the
    strings SQS returns."""
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {name: _message_attribute(value)
                              for name, value in message.get("MessageAttributes", {}).items()},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def sqs_event(messages: list[dict[str, Any]], queue_arn: str, region: str) -> dict[str, Any]:
    """The SQS event Lambda's event source mapping delivers for a batch: ``{"Records": [record, ...]}`` in receive
    order (see :func:`sqs_record`)."""
    return {"Records": [sqs_record(m, queue_arn, region) for m in messages]}


def rule_arn(rule_name: str, region: str, account: str = LOCAL_ACCOUNT_ID) -> str:
    """``arn:aws:events:<region>:<account>:rule/<rule_name>`` — the ARN a scheduled event names in ``resources``."""
    return f"arn:aws:events:{region}:{account}:rule/{rule_name}"


def schedule_event(rule_arn: str, region: str, when: datetime | None = None) -> dict[str, Any]:
    """The EventBridge "Scheduled Event" an ``@app.schedule`` handler receives: ``version`` "0", a fresh ``id``,
    ``detail-type`` "Scheduled Event", ``source`` "aws.events", the ``account`` and ``region`` of ``rule_arn``,
    ``time`` (UTC, ISO 8601 to the second with ``Z``; default now), ``resources`` [rule_arn], ``detail`` {}."""
    when = (when or datetime.now(UTC)).astimezone(UTC)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": rule_arn.split(":")[4],
        "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }
