"""The local stack is provisioned as the deployment is: the bucket notifies the ingest queue of puts and deletes,
queues redrive to their DLQs, the DSN secret reads back through chalicelib's own reader."""

from __future__ import annotations

import json
from urllib.parse import unquote_plus

from chalicelib.store.dsn import url_from_secret


def _bodies(sqs, url, want: int) -> list[dict]:
    out = []
    for _ in range(10):
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
            out.append(json.loads(m["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        if len(out) >= want:
            break
    return out


def test_bucket_notifies_the_ingest_queue_of_puts_and_deletes(make_queues):
    state = make_queues(roles=("ingest", "embed"), max_receives=4, visibility_timeout_s=7)
    s3, sqs = state.client("s3"), state.client("sqs")
    url = state.queue_url(state.roles["ingest"])
    [test_event] = _bodies(sqs, url, 1)
    assert test_event["Event"] == "s3:TestEvent" and test_event["Bucket"] == state.bucket

    s3.put_object(Bucket=state.bucket, Key="acme/docs/a b+c.txt", Body=b"hello")
    s3.delete_object(Bucket=state.bucket, Key="acme/docs/a b+c.txt")
    created, removed = [b["Records"][0] for b in _bodies(sqs, url, 2)]
    assert created["eventName"] == "ObjectCreated:Put" and removed["eventName"] == "ObjectRemoved:Delete"
    assert created["s3"]["bucket"]["name"] == state.bucket
    # URL-encoded as S3 sends it (moto also encodes "/" as %2F; unquote_plus reads both).
    assert "+" in created["s3"]["object"]["key"] and unquote_plus(created["s3"]["object"]["key"]) == "acme/docs/a b+c.txt"
    assert created["s3"]["object"]["eTag"]
    # Nothing goes to the embed queue.
    assert sqs.receive_message(QueueUrl=state.queue_url(state.roles["embed"]), WaitTimeSeconds=0).get("Messages") is None

    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    policy = json.loads(attrs["RedrivePolicy"])
    assert attrs["VisibilityTimeout"] == "7" and int(policy["maxReceiveCount"]) == 4
    assert policy["deadLetterTargetArn"].endswith(":" + state.dead_letter[state.roles["ingest"]])


def test_dsn_secret_reads_back(make_queues):
    dsn = "postgresql://postgres:secret@localhost:5432/engram"
    state = make_queues(dsn=dsn)
    value = state.client("secretsmanager").get_secret_value(SecretId=state.secret_arn)["SecretString"]
    assert url_from_secret(value) == dsn
