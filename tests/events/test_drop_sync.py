"""Syncing the drop folder with its bucket (``sync_drop_folder``, :mod:`chalicelib.events.sync`) under moto, real
Postgres and the real handlers: objects whose S3 events were lost (purged from the queue) are ingested, overwritten
ones re-ingested, deleted ones removed, sidecars applied; a sync of an unchanged bucket sends, writes and embeds
nothing; a sync racing the events applies nothing twice; runs are bounded, resumable, recorded and per tenant."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from urllib.parse import unquote_plus

import pytest

from chalicelib import deps
from chalicelib.embed.hashing import HashingEmbedder
from chalicelib.jobs import runner
from chalicelib.jobs import store as job_store
from chalicelib.store.db import connect
from tests.conftest import BOTH_BACKENDS
from tests.events import state
from tests.events.conftest import BUCKET, INGEST_QUEUE

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

JOB = "sync_drop_folder"


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting its calls and texts."""

    def __init__(self) -> None:
        super().__init__(dimension=384)
        self.calls = 0
        self.texts = 0

    def embed(self, texts):
        self.calls += 1
        self.texts += len(texts)
        return super().embed(texts)


@pytest.fixture()
def tenant(pipeline_settings) -> str:
    """A tenant of its own (the module's database outlives each test's bucket)."""
    from chalicelib.store.vector_stores import ensure_tenant

    name = f"t{uuid.uuid4().hex[:10]}"
    with connect(pipeline_settings) as conn:
        ensure_tenant(conn, name)
    return name


def _sync(settings, tenant: str, store: str | None = None) -> runner.RunOutcome:
    outcome = runner.run_job(settings, JOB, tenant=tenant, force=True, options={"store": store} if store else None)
    assert outcome.status == "finished", outcome
    return outcome


def _lose_events(harness) -> None:
    """What a SIGKILL (or a broken notification) does to the queued S3 events."""
    harness.sqs.purge_queue(QueueUrl=harness.urls[INGEST_QUEUE])


def _counts(**nonzero: int) -> dict[str, int]:
    return {"scanned": 0, "new": 0, "modified": 0, "deleted": 0, "unchanged": 0, "failed": 0, **nonzero}


def _store_files(settings, tenant: str, store: str) -> dict[str, dict]:
    return {name: row for (t, s, name), row in state.files(settings).items() if (t, s) == (tenant, store)}


def _versions(settings, file_id: str) -> list[tuple[int, str]]:
    with connect(settings) as conn:
        return conn.execute("SELECT version, status FROM ingest_jobs WHERE file_id = %s ORDER BY version",
                            (file_id,)).fetchall()


def _texts(settings, file_id: str) -> str:
    with connect(settings) as conn:
        return " ".join(r[0] for r in conn.execute("SELECT text FROM chunks WHERE file_id = %s ORDER BY chunk_index",
                                                    (file_id,)).fetchall())


def _bodies(messages) -> list[dict]:
    return [json.loads(m["Body"]) for m in messages]


def _received(harness) -> list[dict]:
    """Every message of the ingestion queue, received (invisible for 30 s), S3's test event left out."""
    messages = []
    while batch := harness.receive(INGEST_QUEUE):
        messages += [m for m in batch if "Event" not in json.loads(m["Body"])]
    return messages


def test_a_sync_ingests_objects_whose_events_were_lost_and_a_second_changes_nothing(harness, pipeline_settings,
                                                                                 tenant):
    docs = {f"notes/n{i}.txt": f"Note {i} about the harbour and tide number {i}. ".encode() * (1 + i * 40)
            for i in range(10)}
    meta = {"metadataAttributes": {"genre": "log", "year": 2024}}
    for path, data in docs.items():
        harness.put(f"{tenant}/lost/{path}", data)
    harness.put(f"{tenant}/lost/notes/n3.txt.metadata.json", json.dumps(meta).encode())
    harness.put(f"{tenant}/uploads/upload_x/part_y", b"an upload part: internal, never ingested")
    _lose_events(harness)
    assert _store_files(pipeline_settings, tenant, "lost") == {}

    first = _sync(pipeline_settings, tenant)
    assert first.counts == _counts(scanned=11, new=11)
    harness.after_each = lambda: state.check_invariants(pipeline_settings)
    assert not [d for d in harness.drain() if d.failed_ids]
    files = _store_files(pipeline_settings, tenant, "lost")
    assert set(files) == set(docs)  # one file per object, the sidecar and the upload part none
    assert {f["status"] for f in files.values()} == {"completed"}
    assert files["notes/n3.txt"]["attributes"] == {"genre": "log", "year": 2024}
    assert any(f["chunk_count"] > 1 for f in files.values())
    state.check_invariants(pipeline_settings)

    before = state.snapshot(pipeline_settings)
    counting = CountingEmbedder()
    deps.set_embedder(counting)
    second = _sync(pipeline_settings, tenant)
    assert second.counts == _counts(scanned=11, unchanged=11)
    assert harness.depth(INGEST_QUEUE) == 0 and harness.drain() == []
    assert counting.calls == 0
    assert state.snapshot(pipeline_settings) == before  # no version, chunk or attribute changed
    with connect(pipeline_settings) as conn:
        runs = job_store.latest_runs(conn, JOB, scope=tenant, limit=2)
    assert [r.counts for r in runs] == [second.counts, first.counts] and runs[0].status == "finished"


def test_a_lost_overwrite_is_reingested_and_a_lost_delete_removed(harness, pipeline_settings, tenant):
    keep, change, gone = (f"{tenant}/kb/{name}" for name in ("keep.txt", "change.txt", "gone.txt"))
    harness.put(keep, b"kept as it is")
    harness.put(change, b"alpha version of the document")
    harness.put(gone, b"this one will be deleted")
    harness.put(f"{tenant}/kb/keep.txt.metadata.json", json.dumps({"metadataAttributes": {"v": 1}}).encode())
    harness.drain()
    before = _store_files(pipeline_settings, tenant, "kb")
    assert set(before) == {"keep.txt", "change.txt", "gone.txt"} and before["keep.txt"]["attributes"] == {"v": 1}

    harness.put(change, b"beta version, written while the notification was broken")
    harness.delete(gone)
    harness.put(f"{tenant}/kb/keep.txt.metadata.json", json.dumps({"metadataAttributes": {"v": 2}}).encode())
    _lose_events(harness)

    outcome = _sync(pipeline_settings, tenant, store="kb")
    assert outcome.counts == _counts(scanned=3, modified=2, deleted=1, unchanged=1)
    assert not [d for d in harness.drain() if d.failed_ids]
    after = _store_files(pipeline_settings, tenant, "kb")
    assert set(after) == {"keep.txt", "change.txt"}
    assert after["change.txt"]["file_id"] == before["change.txt"]["file_id"]  # the same file, re-ingested
    assert "beta" in _texts(pipeline_settings, after["change.txt"]["file_id"])
    assert "alpha" not in _texts(pipeline_settings, after["change.txt"]["file_id"])
    assert after["keep.txt"]["attributes"] == {"v": 2}
    assert _texts(pipeline_settings, before["gone.txt"]["file_id"]) == ""
    state.check_invariants(pipeline_settings)
    assert _sync(pipeline_settings, tenant, store="kb").counts == _counts(scanned=3, unchanged=3)


def test_a_sync_racing_the_events_applies_nothing_twice(harness, pipeline_settings, tenant):
    first, second = f"{tenant}/race/event-first.txt", f"{tenant}/race/sync-first.txt"
    harness.put(first, b"the event of this object is applied before the sync's message")
    harness.put(second, b"the sync's message for this object is applied before its event")
    outcome = _sync(pipeline_settings, tenant)  # both events still queued: the sync sends both objects too
    assert outcome.counts == _counts(scanned=2, new=2)
    messages = _received(harness)
    assert len(messages) == 4
    by_kind: dict[tuple[str, str], dict] = {}
    for message, body in zip(messages, _bodies(messages)):
        if body.get("type") == "drop.object":
            by_kind[("sync", body["key"])] = message
        else:
            by_kind[("event", unquote_plus(body["Records"][0]["s3"]["object"]["key"]))] = message
    for kind in (("event", first), ("sync", first), ("sync", second), ("event", second)):
        assert not harness.deliver(INGEST_QUEUE, [by_kind[kind]]).failed_ids
    harness.drain()
    files = _store_files(pipeline_settings, tenant, "race")
    assert {f["status"] for f in files.values()} == {"completed"} and len(files) == 2
    for row in files.values():
        assert _versions(pipeline_settings, row["file_id"]) == [(1, "completed")]  # one version each
    state.check_invariants(pipeline_settings)


def test_a_stale_sync_message_never_undoes_a_newer_event(harness, pipeline_settings, tenant):
    key = f"{tenant}/stale/doc.txt"
    harness.put(key, b"version one")
    harness.drain()
    harness.put(key, b"version two, whose event is still queued")
    assert _sync(pipeline_settings, tenant).counts == _counts(scanned=1, modified=1)  # sync saw version two
    harness.put(key, b"version three, written after the sync looked")
    messages = _received(harness)
    bodies = _bodies(messages)
    assert len(messages) == 3
    events = [m for m, b in zip(messages, bodies) if "Records" in b]
    synced = [m for m, b in zip(messages, bodies) if b.get("type") == "drop.object"]
    newest = max(events, key=lambda m: json.loads(m["Body"])["Records"][0]["eventTime"])
    older = [m for m in events if m is not newest]
    for message in [newest, *synced, *older]:  # the newest event first, then the stale ones
        assert not harness.deliver(INGEST_QUEUE, [message]).failed_ids
    harness.drain()
    row = _store_files(pipeline_settings, tenant, "stale")["doc.txt"]
    assert row["status"] == "completed" and "three" in _texts(pipeline_settings, row["file_id"])
    assert len(_versions(pipeline_settings, row["file_id"])) == 2  # version one, then version three only
    assert _sync(pipeline_settings, tenant).counts == _counts(scanned=1, unchanged=1)


def test_an_object_missing_from_a_stale_listing_is_never_removed(harness, pipeline_settings, tenant, monkeypatch):
    from chalicelib.events import sync

    key = f"{tenant}/listing/here.txt"
    harness.put(key, b"listed a moment too early")
    harness.drain()
    original = sync._Run._list

    def without_it(self, prefix, after):
        contents, truncated = original(self, prefix, after)
        return [c for c in contents if c["Key"] != key], truncated

    monkeypatch.setattr(sync._Run, "_list", without_it)
    assert _sync(pipeline_settings, tenant).counts == _counts()  # the HEAD finds it: nothing to do
    assert harness.depth(INGEST_QUEUE) == 0
    assert _store_files(pipeline_settings, tenant, "listing")["here.txt"]["status"] == "completed"


def test_a_sync_is_bounded_and_resumes_where_it_stopped(harness, pipeline_settings, tenant, monkeypatch):
    from chalicelib.events import sync

    monkeypatch.setattr(sync, "PAGE_KEYS", 3)
    names = [f"f{i:02d}.txt" for i in range(8)]
    for name in names:
        harness.put(f"{tenant}/paged/{name}", f"paged file {name}".encode())
    _lose_events(harness)
    totals, cursor, runs, saved = _counts(), None, 0, []
    while True:
        ticks = iter(range(1000))  # out of time after two keys
        result = sync.run(pipeline_settings, deps.dispatcher(pipeline_settings), tenant=tenant, cursor=cursor,
                          out_of_time=lambda ticks=ticks: next(ticks) >= 1, checkpoint=saved.append)
        runs += 1
        for name, value in result.counts.items():
            totals[name] += value
        cursor = result.cursor
        if cursor is None:
            break
        assert cursor["tenant"] == tenant and cursor["after"].startswith(f"{tenant}/paged/")
    assert runs > 2 and saved and totals == _counts(scanned=8, new=8)
    harness.drain()
    assert set(_store_files(pipeline_settings, tenant, "paged")) == set(names)


def test_bad_keys_and_refused_objects_count_as_failed_and_leave_one_error(harness, pipeline_settings, tenant):
    harness.put(f"{tenant}/top-level.txt", b"a key without a store segment")
    harness.put(f"{tenant}/{'vs_' + 'x' * 20}/doc.txt", b"names a store id that does not exist")
    _lose_events(harness)
    assert _sync(pipeline_settings, tenant).counts == _counts(scanned=2, failed=1, new=1)
    harness.drain()
    again = _sync(pipeline_settings, tenant)
    assert again.counts == _counts(scanned=2, failed=2)  # both tried again, both counted failed
    harness.drain()
    with connect(pipeline_settings) as conn:
        errors = conn.execute("SELECT key, code FROM drop_errors WHERE tenant_id = %s ORDER BY key",
                              (tenant,)).fetchall()
    assert errors == [(f"{tenant}/top-level.txt", "invalid_key"),
                      (f"{tenant}/{'vs_' + 'x' * 20}/doc.txt", "store_not_found")]  # once each, however many syncs


def test_a_tenants_sync_never_touches_another_tenants_prefix(harness, pipeline_settings, tenant):
    from chalicelib.store.vector_stores import ensure_tenant

    other = tenant + "x"  # shares the name as a prefix: "<tenant>x/" is not under "<tenant>/"
    with connect(pipeline_settings) as conn:
        ensure_tenant(conn, other)
    harness.put(f"{tenant}/mine/a.txt", b"belongs to the first tenant")
    harness.put(f"{other}/theirs/b.txt", b"belongs to the other tenant")
    _lose_events(harness)
    assert _sync(pipeline_settings, other).counts == _counts(scanned=1, new=1)
    harness.drain()
    assert _store_files(pipeline_settings, tenant, "mine") == {}
    assert set(_store_files(pipeline_settings, other, "theirs")) == {"b.txt"}


def test_a_disabled_drop_folder_is_not_synced(harness, pipeline_settings, tenant):
    from chalicelib.errors import InvalidRequestError
    from chalicelib.events import sync
    from chalicelib.store import tenants

    harness.put(f"{tenant}/off/a.txt", b"dropped while the folder is off")
    _lose_events(harness)
    with connect(pipeline_settings) as conn:
        tenants.set_drop_folder(conn, tenant, False)
    with pytest.raises(InvalidRequestError) as caught:
        sync.scope(pipeline_settings, tenant)
    assert caught.value.code == "drop_folder_disabled"
    everyone = runner.run_job(pipeline_settings, JOB, force=True)  # the scheduled run: every tenant whose folder is on
    assert everyone.status == "finished"
    assert all(not b.get("key", "").startswith(f"{tenant}/") for b in _bodies(_received(harness)))
    assert _store_files(pipeline_settings, tenant, "off") == {}


def test_synced_records_order_like_events(pipeline_settings):
    from chalicelib.events.drop import _order
    from chalicelib.events.notifications import S3Record
    from chalicelib.store.drop_objects import DropObject

    t0, t1, t2 = (datetime(2025, 1, 1, 0, 0, s, tzinfo=UTC) for s in (1, 2, 3))
    row = DropObject("a", BUCKET, "a/s/x", "vs_1", "file-1", 1, "e1", "0055", t1, False, None)

    def synced(etag, when, name="ObjectCreated:Sync"):
        return S3Record(name, BUCKET, "a/s/x", 1, etag, None, when, synced=True)

    assert _order(synced("e1", t2), row) == 0  # what the event applied: a duplicate, whatever the time
    assert _order(synced("e2", t2), row) == 1  # another ETag, seen after the applied event
    assert _order(synced("e2", t0), row) == -1  # another ETag, seen before it: stale
    assert _order(synced(None, t2, "ObjectRemoved:Sync"), row) == 1
    gone = DropObject("a", BUCKET, "a/s/x", "vs_1", None, None, None, None, t1, True, None)
    assert _order(synced(None, t0, "ObjectRemoved:Sync"), gone) == 0
    assert synced("e1", t0).event_id == synced("e1", t2).event_id == "ObjectCreated:Sync|e1"


def test_the_message_round_trips_and_refuses_what_it_cannot_apply():
    from chalicelib.dispatch import port
    from chalicelib.events.consumer import decode_body
    from chalicelib.events.synced import ObjectMessage
    from chalicelib.store import drop_errors

    message = ObjectMessage("acme", BUCKET, "acme/s/ü x.txt", "created", "e1", 12, "2025-01-01T00:00:01.5+00:00")
    assert decode_body(port.encode(message)) == message
    record = message.record()
    assert (record.is_created, record.synced, record.sequencer, record.size) == (True, True, None, 12)
    assert record.event_id == drop_errors.SYNCED_EVENT + "e1"  # what the sync looks its failures up by
    assert ObjectMessage("acme", BUCKET, "acme/s/x", "removed", "", 0, "2025-01-01T00:00:01+00:00").record().is_removed
    for bad in (ObjectMessage("acme", BUCKET, "acme/s/x", "copied", "e1", 1, "2025-01-01T00:00:01+00:00"),
                ObjectMessage("acme", BUCKET, "acme/s/x", "created", "e1", 1, "yesterday"),
                ObjectMessage("acme", BUCKET, "acme/s/x", "created", "e1", 1, "2025-01-01T00:00:01")):
        with pytest.raises(port.MessageError):
            bad.record()
