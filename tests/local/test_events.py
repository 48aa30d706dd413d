"""Lambda event shapes built from real SQS messages (moto), checked against Powertools' pydantic models of the AWS
events (``SqsModel``, ``EventBridgeModel``)."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel, SqsModel

from engram_cli.local.events import rule_arn, schedule_event, sqs_event


def test_sqs_event_from_received_messages(make_queues):
    state = make_queues(roles=("drop", "work"))  # "work" gets no S3 test event
    sqs = state.client("sqs")
    url = state.queue_url(state.roles["work"])
    sqs.send_message(QueueUrl=url, MessageBody='{"n": 1}', MessageAttributes={
        "kind": {"DataType": "String", "StringValue": "batch"},
        "count": {"DataType": "Number", "StringValue": "3"},
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    })
    sqs.send_message(QueueUrl=url, MessageBody="plain")
    messages = []
    while len(messages) < 2:
        messages += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                        AttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
    arn = f"arn:aws:sqs:{state.region}:123456789012:{state.roles['work']}"
    event = sqs_event(messages, arn, state.region)

    parsed = SqsModel.model_validate(event)  # the shape Lambda delivers
    assert [r.body for r in parsed.Records] == ['{"n": 1}', "plain"]
    first, second = event["Records"]
    assert first["eventSource"] == "aws:sqs" and first["eventSourceARN"] == arn and first["awsRegion"] == "us-east-1"
    assert first["messageId"] == messages[0]["MessageId"] and first["receiptHandle"] == messages[0]["ReceiptHandle"]
    assert first["md5OfBody"] == hashlib.md5(b'{"n": 1}').hexdigest()
    assert first["attributes"]["ApproximateReceiveCount"] == "1"
    assert {"SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} <= first["attributes"].keys()
    assert first["messageAttributes"]["kind"] == {"stringValue": "batch", "stringListValues": [],
                                                  "binaryListValues": [], "dataType": "String"}
    assert first["messageAttributes"]["count"]["dataType"] == "Number"
    assert base64.b64decode(first["messageAttributes"]["blob"]["binaryValue"]) == b"\x00\x01"
    assert "md5OfMessageAttributes" in first and second["messageAttributes"] == {}


def test_schedule_event_shape():
    arn = rule_arn("engram-dev-housekeeping", "eu-west-1")
    event = schedule_event(arn, "eu-west-1", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    parsed = EventBridgeModel.model_validate(event)
    assert parsed.detail_type == "Scheduled Event" and parsed.source == "aws.events"
    assert event["time"] == "2026-01-02T03:04:05Z" and event["resources"] == [arn]
    assert event["account"] == "123456789012" and event["region"] == "eu-west-1" and event["detail"] == {}
    assert arn == "arn:aws:events:eu-west-1:123456789012:rule/engram-dev-housekeeping"
