"""Decoding what arrives on the queues: S3 keys (URL-decoded, tenant/store/path), sequencer order, message
shapes, sidecar metadata."""

from __future__ import annotations

import json

import pytest

from chalicelib import dispatch
from chalicelib.dispatch.table import MESSAGES, QUEUES, queue_for
from chalicelib.entrypoints import resolve
from chalicelib.errors import InvalidRequestError
from chalicelib.events import notifications, s3_keys, sidecar
from chalicelib.events.consumer import decode_body
from chalicelib.ingest.messages import BatchMessage, FileMessage


def _s3_body(key: str, **obj) -> str:
    return json.dumps({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                                    "eventTime": "2025-01-02T03:04:05.678Z",
                                    "s3": {"bucket": {"name": "b"}, "object": {"key": key, **obj}}}]})


def test_keys_are_url_decoded_like_s3_sends_them():
    [record] = decode_body(_s3_body("acme/My+Store/reports%2F2024/Q1+plan%C3%A9.txt", size=5,
                                               eTag="abc", sequencer="00A1"))
    assert record.key == "acme/My Store/reports/2024/Q1 plané.txt"
    key = s3_keys.parse(record.key)
    assert (key.tenant, key.store, key.path) == ("acme", "My Store", "reports/2024/Q1 plané.txt")
    assert record.size == 5 and record.etag == "abc" and record.sequencer == "00A1" and record.is_created


@pytest.mark.parametrize("key", ["acme/only-two", "acme//x.txt", "acme/s/../x", "acme/s/dir/", "acme/s/" + "x" * 300])
def test_bad_keys_are_refused(key):
    with pytest.raises(s3_keys.DropKeyError):
        s3_keys.parse(key)


def test_internal_keys_are_recognised():
    assert s3_keys.is_internal("files/acme/file-abc")
    assert s3_keys.is_internal("acme/uploads/upload_abc/part_def")
    assert not s3_keys.is_internal("acme/uploads/notes.txt")


def test_sidecar_key_names_its_file():
    key = s3_keys.parse("acme/docs/a/b.pdf.metadata.json")
    assert key.is_sidecar and key.target_key == "acme/docs/a/b.pdf"
    assert s3_keys.parse("acme/docs/a/b.pdf").sidecar_key == "acme/docs/a/b.pdf.metadata.json"


def test_sequencers_compare_after_right_padding():
    assert notifications.compare_sequencers("0055AED6DCD90281E5", "0055AED6DCD90281E6") == -1
    assert notifications.compare_sequencers("0055AED6DCD9028", "0055AED6DCD90281E5") == -1  # padded with zeros
    assert notifications.compare_sequencers("0055aed6", "0055AED6") == 0
    assert notifications.compare_sequencers("0056", "0055FFFF") == 1


def test_test_event_and_sns_wrapping_and_our_messages():
    assert isinstance(decode_body(json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": "b"})),
                      notifications.TestEvent)
    wrapped = json.dumps({"Type": "Notification", "Message": _s3_body("acme/s/x.txt")})
    assert decode_body(wrapped)[0].key == "acme/s/x.txt"
    file_message = FileMessage("acme", "vs_1", "file-1", 3)
    assert decode_body(dispatch.encode(file_message)) == file_message
    batch_message = BatchMessage("acme", "vs_1", "file-1", 3, 7)
    assert decode_body(dispatch.encode(batch_message)) == batch_message
    assert len(dispatch.encode(batch_message)) < 300  # ids only
    bad = ("not json", "[]", json.dumps({"type": "ingest.file"}), json.dumps({"hello": 1}),
           json.dumps({"type": "embed.batch", "v": 1, "tenant": "a", "vector_store_id": "vs_1", "file_id": "f",
                       "version": "x", "batch": 0}),
           json.dumps({"type": "ingest.file", "v": 2, "tenant": "a", "vector_store_id": "v", "file_id": "f",
                       "version": 1}))
    for body in bad:
        with pytest.raises(dispatch.MessageError):
            decode_body(body)


def test_every_message_row_resolves_and_names_a_queue():
    for kind, row in MESSAGES.items():
        assert row.message_class().kind == kind
        assert callable(resolve(row.handler)) and callable(resolve(row.give_up))
        assert queue_for(kind) in QUEUES
    assert len({q.name for q in QUEUES}) == len(QUEUES) and len({q.function for q in QUEUES}) == len(QUEUES)


def test_removal_events():
    body = json.loads(_s3_body("acme/s/x.txt"))
    body["Records"][0]["eventName"] = "ObjectRemoved:Delete"
    [record] = decode_body(json.dumps(body))
    assert record.is_removed and not record.is_created


def test_sidecar_metadata_bedrock_format():
    data = json.dumps({"metadataAttributes": {"genre": "fiction", "year": 1999, "draft": False,
                                              "lang": {"value": {"type": "STRING", "stringValue": "en"},
                                                       "includeForEmbedding": True}}}).encode()
    assert sidecar.parse(data) == {"genre": "fiction", "year": 1999, "draft": False, "lang": "en"}
    for bad in (b"{", b'{"other": {}}', json.dumps({"metadataAttributes": {"tags": ["a"]}}).encode(),
                json.dumps({"metadataAttributes": {f"k{i}": i for i in range(17)}}).encode()):
        with pytest.raises(InvalidRequestError) as caught:
            sidecar.parse(bad)
        assert caught.value.code == "invalid_metadata"
