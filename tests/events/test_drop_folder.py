"""The S3 drop folder end to end under moto: real S3 notifications → ingestion queue → ingestion handler →
embedding batches → embedding handler, with real Postgres. Every file ends as the inline pipeline would end it,
duplicates change nothing, overwrites replace, deletes remove, sidecars set attributes, bad keys leave errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chalicelib.store.db import connect
from tests.conftest import BOTH_BACKENDS
from tests.events import state
from tests.events.conftest import BUCKET, EMBED_DLQ, EMBED_QUEUE, INGEST_DLQ, INGEST_QUEUE

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
TOTAL_FILES = 50


def _generated() -> dict[str, bytes]:
    """Small files any clone has: every text format, plus one of each failure (unsupported, damaged)."""
    words = " ".join(f"word{i} topic{i % 7}" for i in range(400))
    return {
        "notes/plain.txt": f"Plain text about drop folders. {words}".encode(),
        # Long enough for more than 8 chunks (several embedding batches) without ../shared.
        "notes/long.txt": " ".join(f"Sentence {i} on subject{i % 13} and queue{i % 5}." for i in range(1500)).encode(),
        "notes/readme.md": b"# Title\n\nSome *markdown* about queues.\n\n" + words.encode(),
        "data/table.csv": b"name,city\nAda,London\nGrace,Arlington\n",
        "data/page.html": b"<html><body><h1>Hello</h1><p>Fan-out of embedding batches.</p></body></html>",
        "data/doc.json": json.dumps({"title": "json", "body": words[:500]}).encode(),
        "bad/binary.xyz": b"\x00\x01\x02 not a format anyone reads",
        "bad/broken.pdf": b"%PDF-1.4 this is not really a pdf",
        "empty.txt": b"",
    }


def _corpus() -> dict[str, bytes]:
    """``TOTAL_FILES`` files: generated ones, ../shared/data/docs, NFCorpus documents written out as files."""
    out = _generated()
    docs = SHARED / "docs"
    if docs.is_dir():
        out.update({f"real/{p.name}": p.read_bytes() for p in sorted(docs.iterdir()) if p.name != "MANIFEST.md"})
    corpus = SHARED / "beir" / "nfcorpus" / "corpus.jsonl"
    if corpus.is_file():
        with corpus.open(encoding="utf-8") as lines:
            for line in lines:
                if len(out) >= TOTAL_FILES:
                    break
                doc = json.loads(line)
                out[f"nfcorpus/{doc['_id']}.txt"] = f"{doc.get('title', '')}\n\n{doc['text']}".encode()
    return out


def _reference(settings, hashing_embedder, corpus: dict[str, bytes]) -> dict[str, tuple[str, str | None, int]]:
    """What the engine makes of each file run inline: ``{path: (status, error code, chunk count)}``."""
    from chalicelib.ingest.pipeline import ingest_bytes
    from chalicelib.store import vector_stores

    out = {}
    with connect(settings) as conn:
        store = vector_stores.create(conn, "reference", name="reference", model=hashing_embedder.model,
                                     dim=hashing_embedder.dimension)
        for path, data in corpus.items():
            result = ingest_bytes(conn, settings, "reference", store, filename=path, data=data,
                                  embedder=hashing_embedder)
            out[path] = (result.status, (result.error or {}).get("code"), result.chunk_count)
    return out


def test_drop_folder_ingests_like_the_pipeline_and_duplicates_change_nothing(harness, pipeline_settings,
                                                                            hashing_embedder):
    corpus = _corpus()
    expected = _reference(pipeline_settings, hashing_embedder, corpus)
    harness.after_each = lambda: state.check_invariants(pipeline_settings)
    for path, data in corpus.items():
        harness.put(f"acme/library/{path}", data)
    deliveries = harness.drain()
    assert not [d for d in deliveries if d.failed_ids]
    files = {k[2]: v for k, v in state.files(pipeline_settings).items() if k[:2] == ("acme", "library")}
    assert set(files) == set(corpus)
    with connect(pipeline_settings) as conn:  # the drop folder made its store on the configured backend
        assert conn.execute("SELECT backend FROM vector_stores WHERE tenant_id = 'acme' AND name = 'library'"
                            ).fetchall() == [(pipeline_settings.vector_backend,)]
    for path, (status, code, chunks) in expected.items():
        got = files[path]
        assert (got["status"], (got["last_error"] or {}).get("code"), got["chunk_count"]) == (status, code, chunks), path
    assert any(f["status"] == "failed" for f in files.values()) and any(f["chunk_count"] > 8 for f in files.values())
    assert sum(d.queue == EMBED_QUEUE for d in deliveries) > 1  # batches really fanned out
    before = state.snapshot(pipeline_settings)
    assert before["staged"] == 0

    # At-least-once: every message delivered again, in a different order, changes nothing.
    for queue in (EMBED_QUEUE, INGEST_QUEUE):
        for body in reversed(harness.sent_bodies[queue]):
            harness.send(queue, body)
    again = harness.drain()
    assert not [d for d in again if d.failed_ids]
    assert state.snapshot(pipeline_settings) == before
    assert harness.depth(INGEST_DLQ) == harness.depth(EMBED_DLQ) == 0


def test_test_event_is_ignored_and_a_bad_record_fails_alone(harness, pipeline_settings):
    messages = harness.receive(INGEST_QUEUE)
    assert [json.loads(m["Body"]).get("Event") for m in messages] == ["s3:TestEvent"]
    assert harness.deliver(INGEST_QUEUE, messages).failed_ids == []
    harness.put("acme/mixed/one.txt", b"first file")
    harness.send(INGEST_QUEUE, "this is not an S3 event")
    harness.put("acme/mixed/two.txt", b"second file")
    batch = harness.receive(INGEST_QUEUE)
    assert len(batch) == 3
    delivery = harness.deliver(INGEST_QUEUE, batch)
    bad = [m["MessageId"] for m in batch if m["Body"] == "this is not an S3 event"]
    assert delivery.failed_ids == bad
    harness.drain()
    files = state.files(pipeline_settings)
    assert files[("acme", "mixed", "one.txt")]["status"] == "completed"
    assert files[("acme", "mixed", "two.txt")]["status"] == "completed"
    assert harness.depth(INGEST_DLQ) == 1  # the poison message, after max receives


def _chunk_rows(settings, file_id: str) -> list[tuple]:
    with connect(settings) as conn:
        return conn.execute("SELECT id, chunk_index, text, attributes FROM chunks WHERE file_id = %s "
                            "ORDER BY chunk_index", (file_id,)).fetchall()


def test_overwrite_replaces_and_delete_removes(harness, pipeline_settings):
    harness.after_each = lambda: state.check_invariants(pipeline_settings)
    key = "acme/versions/doc.txt"
    harness.put(key, " ".join(f"alpha{i}" for i in range(3000)).encode())
    harness.drain()
    first = state.files(pipeline_settings)[("acme", "versions", "doc.txt")]
    assert first["status"] == "completed" and first["chunk_count"] > 1
    harness.put(key, b"beta only, a much shorter second version")
    harness.drain()
    second = state.files(pipeline_settings)[("acme", "versions", "doc.txt")]
    assert second["file_id"] == first["file_id"] and second["status"] == "completed"
    rows = _chunk_rows(pipeline_settings, first["file_id"])
    assert len(rows) == second["chunk_count"] == 1 and "beta" in rows[0][2] and "alpha" not in rows[0][2]
    with connect(pipeline_settings) as conn:
        assert conn.execute("SELECT bytes, content, content_key FROM files WHERE id = %s",
                            (first["file_id"],)).fetchone() == (40, None, key)
    harness.delete(key)
    harness.drain()
    assert ("acme", "versions", "doc.txt") not in state.files(pipeline_settings)
    assert _chunk_rows(pipeline_settings, first["file_id"]) == []
    with connect(pipeline_settings) as conn:
        assert conn.execute("SELECT count(*) FROM files WHERE id = %s", (first["file_id"],)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM staged_chunks").fetchone()[0] == 0
    harness.put(key, b"back again")
    harness.drain()
    assert state.files(pipeline_settings)[("acme", "versions", "doc.txt")]["status"] == "completed"


def test_out_of_order_and_duplicate_events_by_sequencer(harness, pipeline_settings):
    key = "acme/ordered/x.txt"
    old_etag = harness.put(key, b"old content")
    new_etag = harness.put(key, b"new content")
    harness.sqs.purge_queue(QueueUrl=harness.urls[INGEST_QUEUE])  # replace moto's (sequencer-less) events

    def event(etag: str, sequencer: str, size: int) -> str:
        return json.dumps({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3",
                                        "eventTime": "2025-01-01T00:00:00.000Z", "eventName": "ObjectCreated:Put",
                                        "s3": {"bucket": {"name": BUCKET},
                                               "object": {"key": key, "size": size, "eTag": etag,
                                                          "sequencer": sequencer}}}]})

    harness.send(INGEST_QUEUE, event(new_etag, "0062E99A88DC407461", 11))
    harness.drain()
    done = state.files(pipeline_settings)[("acme", "ordered", "x.txt")]
    harness.send(INGEST_QUEUE, event(old_etag, "0062E99A88DC407460", 11))  # older: ignored
    harness.send(INGEST_QUEUE, event(new_etag, "0062E99A88DC407461", 11))  # duplicate: nothing to do
    harness.drain()
    after = state.files(pipeline_settings)[("acme", "ordered", "x.txt")]
    assert after == done and done["status"] == "completed"
    assert "new content" in _chunk_rows(pipeline_settings, done["file_id"])[0][2]


def test_sidecar_before_and_after_its_file(harness, pipeline_settings, hashing_embedder):
    meta = {"metadataAttributes": {"genre": "report", "year": 2024}}
    harness.put("acme/meta/early.txt.metadata.json", json.dumps(meta).encode())
    harness.drain()
    harness.put("acme/meta/early.txt", b"a file whose sidecar came first")
    harness.put("acme/meta/late.txt", b"a file whose sidecar comes later")
    harness.drain()
    files = state.files(pipeline_settings)
    assert files[("acme", "meta", "early.txt")]["attributes"] == {"genre": "report", "year": 2024}
    assert files[("acme", "meta", "late.txt")]["attributes"] == {}
    late_id = files[("acme", "meta", "late.txt")]["file_id"]
    chunks_before = _chunk_rows(pipeline_settings, late_id)
    harness.put("acme/meta/late.txt.metadata.json", json.dumps({"metadataAttributes": {"draft": True}}).encode())
    harness.drain()
    late = state.files(pipeline_settings)[("acme", "meta", "late.txt")]
    assert late["attributes"] == {"draft": True}
    chunks_after = _chunk_rows(pipeline_settings, late_id)
    assert [r[0] for r in chunks_after] == [r[0] for r in chunks_before]  # same rows: not re-embedded
    assert all(r[3] == {"draft": True} for r in chunks_after)
    harness.delete("acme/meta/late.txt.metadata.json")
    harness.drain()
    assert state.files(pipeline_settings)[("acme", "meta", "late.txt")]["attributes"] == {}
    assert ("acme", "meta", "early.txt.metadata.json") not in state.files(pipeline_settings)  # never a file


@pytest.mark.parametrize("name, sidecar", [
    ("nan", b'{"metadataAttributes": {"year": NaN}}'),
    ("infinity", b'{"metadataAttributes": {"year": -Infinity}}'),
    ("huge", b'{"metadataAttributes": {"year": 1e400}}'),
    ("huge-typed", b'{"metadataAttributes": {"year": {"value": {"type": "NUMBER", "numberValue": -1e400}}}}'),
    ("nul-value", b'{"metadataAttributes": {"genre": "a\\u0000b"}}'),
    ("nul-key", b'{"metadataAttributes": {"gen\\u0000re": "x"}}'),
    ("surrogate", b'{"metadataAttributes": {"genre": "\\udc00"}}'),
    ("nested", b'{"metadataAttributes": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
])
def test_a_sidecar_the_database_cannot_hold_is_invalid_metadata_at_once(harness, pipeline_settings, name, sidecar):
    """NaN, 1e400 (infinity), NUL or a lone surrogate would fail the jsonb write on every redelivery (retried for
    the queue's whole receive budget, then reported as something else, while the file went in without its
    attributes and without a word). They are the sidecar's fault: recorded as invalid_metadata on the first
    delivery, never retried; the attributes a good sidecar set before stay."""
    folder = f"acme/hostile-{name}"
    harness.put(f"{folder}/doc.txt.metadata.json", json.dumps({"metadataAttributes": {"genre": "report"}}).encode())
    harness.put(f"{folder}/doc.txt", b"a document whose sidecar turns hostile")
    harness.drain()
    assert state.files(pipeline_settings)[("acme", f"hostile-{name}", "doc.txt")]["attributes"] == {"genre": "report"}
    harness.put(f"{folder}/doc.txt.metadata.json", sidecar)
    deliveries = harness.drain()
    assert deliveries and not [d for d in deliveries if d.failed_ids]  # handled on the first receive
    assert harness.depth(INGEST_QUEUE) == harness.depth(INGEST_DLQ) == 0
    with connect(pipeline_settings) as conn:
        rows = conn.execute("SELECT code, message FROM drop_errors WHERE key = %s",
                            (f"{folder}/doc.txt.metadata.json",)).fetchall()
    assert [code for code, _ in rows] == ["invalid_metadata"], rows
    assert "Invalid sidecar metadata" in rows[0][1]
    file = state.files(pipeline_settings)[("acme", f"hostile-{name}", "doc.txt")]
    assert file["status"] == "completed" and file["attributes"] == {"genre": "report"}
    # A file whose only sidecar is hostile goes in with no attributes, and the error says why.
    harness.put(f"{folder}/fresh.txt.metadata.json", sidecar)
    harness.put(f"{folder}/fresh.txt", b"a document whose sidecar was always hostile")
    deliveries = harness.drain()
    assert not [d for d in deliveries if d.failed_ids]
    assert state.files(pipeline_settings)[("acme", f"hostile-{name}", "fresh.txt")]["attributes"] == {}
    with connect(pipeline_settings) as conn:
        assert conn.execute("SELECT code FROM drop_errors WHERE key = %s",
                            (f"{folder}/fresh.txt.metadata.json",)).fetchall() == [("invalid_metadata",)]


def test_bad_keys_leave_visible_errors(harness, pipeline_settings, monkeypatch):
    from typer.testing import CliRunner

    from chalicelib import config
    from engram_cli.main import app as cli

    harness.put("nosuchtenant/store/a.txt", b"x")
    harness.put("acme/two-segments", b"x")
    harness.put("acme/vs_0000000000doesnotexist/a.txt", b"x")
    harness.put("acme/meta2/a.txt.metadata.json", b'{"metadataAttributes": {"tags": ["not", "allowed"]}}')
    harness.put("files/acme/file-whatever", b"internal: ignored")
    deliveries = harness.drain()
    assert not [d for d in deliveries if d.failed_ids]
    with connect(pipeline_settings) as conn:
        errors = {k: c for k, c in conn.execute("SELECT key, code FROM drop_errors").fetchall()}
    assert errors["nosuchtenant/store/a.txt"] == "unknown_tenant"
    assert errors["acme/two-segments"] == "invalid_key"
    assert errors["acme/vs_0000000000doesnotexist/a.txt"] == "store_not_found"
    assert errors["acme/meta2/a.txt.metadata.json"] == "invalid_metadata"
    assert "files/acme/file-whatever" not in errors
    # Redelivery records nothing twice.
    for body in harness.sent_bodies[INGEST_QUEUE]:
        harness.send(INGEST_QUEUE, body)
    harness.drain()
    with connect(pipeline_settings) as conn:
        assert conn.execute("SELECT count(*) FROM drop_errors").fetchone()[0] == len(errors)
    monkeypatch.setenv("ENGRAM_TENANT", "acme")
    config.settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["stats", "--json"])
        operator = CliRunner().invoke(cli, ["stats", "--json", "--operator"])
    finally:
        config.settings.cache_clear()
    assert result.exit_code == 0 and operator.exit_code == 0, result.output + operator.output
    shown = {e["key"]: e["code"] for e in json.loads(result.output)["drop_errors"]}
    # the tenant's view: its own errors only (a key naming no tenant may name another tenant's stores and files)
    assert shown["acme/vs_0000000000doesnotexist/a.txt"] == "store_not_found"
    assert "nosuchtenant/store/a.txt" not in shown and "acme/two-segments" not in shown  # no tenant named them
    assert {e["tenant"] for e in json.loads(result.output)["drop_errors"]} == {"acme"}
    everything = {e["key"]: e["code"] for e in json.loads(operator.output)["drop_errors"]}
    assert everything["nosuchtenant/store/a.txt"] == "unknown_tenant" and everything["acme/two-segments"] == "invalid_key"


def test_a_drop_naming_another_tenants_shared_store_is_refused(harness, pipeline_settings, hashing_embedder):
    from chalicelib.store import vector_stores

    with connect(pipeline_settings) as conn:
        store = vector_stores.create(conn, "acme", name="handbook", model=hashing_embedder.model,
                                     dim=hashing_embedder.dimension)
        vector_stores.set_shared(conn, store.id, True, by="ops")
    key = f"beta/{store.id}/planted.txt"
    harness.put(key, b"beta's words planted in acme's shared handbook")
    deliveries = harness.drain()
    assert not [d for d in deliveries if d.failed_ids]
    with connect(pipeline_settings) as conn:
        assert conn.execute("SELECT code FROM drop_errors WHERE key = %s", (key,)).fetchone() \
            == (vector_stores.READ_ONLY_CODE,)
        assert conn.execute("SELECT count(*) FROM vector_store_files WHERE vector_store_id = %s",
                            (store.id,)).fetchone()[0] == 0


def test_a_drop_into_one_tenant_never_touches_another(harness, pipeline_settings):
    harness.put("beta/shared/same.txt", b"beta's own words")
    harness.drain()
    beta_before = {k: v for k, v in state.snapshot(pipeline_settings)["files"].items() if k[0] == "beta"}
    beta_chunks = _chunk_rows(pipeline_settings, beta_before[("beta", "shared", "same.txt")]["file_id"])
    harness.put("acme/shared/same.txt", b"acme's words")
    harness.put("acme/shared/same.txt", b"acme's words, overwritten")
    harness.delete("acme/shared/same.txt")
    harness.put("acme/shared/other.txt", b"more of acme")
    harness.drain()
    files = state.snapshot(pipeline_settings)["files"]
    assert {k: v for k, v in files.items() if k[0] == "beta"} == beta_before
    assert _chunk_rows(pipeline_settings, beta_before[("beta", "shared", "same.txt")]["file_id"]) == beta_chunks
    assert files[("acme", "shared", "other.txt")]["status"] == "completed"
    with connect(pipeline_settings) as conn:
        stores = conn.execute("SELECT tenant_id, count(*) FROM vector_stores WHERE name = 'shared' "
                              "GROUP BY 1 ORDER BY 1").fetchall()
    assert stores == [("acme", 1), ("beta", 1)]
