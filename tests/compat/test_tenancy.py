"""Tenant isolation, both walls.

1. The API: tenant "blue" calls every route with tenant "red"'s ids and gets 404 (never 403, never the object),
   and red's objects are unchanged afterwards; blue's lists and searches never show red's data.
2. The database: a connection acting as ``engram_app`` for blue (``tenant_connection``) sees none of red's rows
   even with no ``WHERE tenant_id`` at all, cannot write rows for red, and cannot read ``api_keys``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import openai
import psycopg
import pytest

from chalicelib.store import db
from tests.conftest import BOTH_BACKENDS

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

RED_TEXT = b"Crimson ledger: the red tenant's quarterly octarine budget is forty-two thousand florins."
RED_BATCH_TEXT = b"Scarlet memo: red's zeppelin maintenance happens every third Thursday at the aerodrome."
BLUE_TEXT = b"Cobalt notes: the blue tenant keeps its harpsichord tuning schedule here."
RED_UPLOAD = b"Vermilion draft: red's upload, sent in one part, not yet completed."


@dataclass
class Red:
    file_id: str
    batch_file_id: str
    store_id: str
    batch_id: str
    upload_id: str
    part_id: str
    pending_upload_id: str  # stays pending, its part stored


@dataclass
class Blue:
    file_id: str
    store_id: str
    batch_id: str


@pytest.fixture(scope="module")
def red_client(make_client) -> openai.OpenAI:
    return make_client("red")


@pytest.fixture(scope="module")
def blue_client(make_client) -> openai.OpenAI:
    return make_client("blue")


@pytest.fixture(scope="module")
def red(red_client) -> Red:
    """Red's objects: a file in a (completed) store, a second file attached through a batch."""
    f = red_client.files.create(file=("red.txt", RED_TEXT), purpose="assistants")
    store = red_client.vector_stores.create(name="red-store", file_ids=[f.id], metadata={"owner": "red"})
    assert red_client.vector_stores.files.retrieve(f.id, vector_store_id=store.id).status == "completed"
    g = red_client.files.create(file=("red-batch.txt", RED_BATCH_TEXT), purpose="assistants")
    batch = red_client.vector_stores.file_batches.create(store.id, file_ids=[g.id])
    assert batch.status == "completed", batch
    hits = red_client.vector_stores.search(store.id, query=RED_TEXT.decode()).data
    assert hits and hits[0].file_id == f.id and RED_TEXT.decode() in hits[0].content[0].text
    upload = red_client.uploads.create(bytes=len(RED_UPLOAD), filename="red-upload.txt", mime_type="text/plain",
                                       purpose="assistants")
    part = red_client.uploads.parts.create(upload.id, data=RED_UPLOAD)
    pending = red_client.uploads.create(bytes=2 * len(RED_UPLOAD), filename="red-pending.txt",
                                        mime_type="text/plain", purpose="assistants")
    red_client.uploads.parts.create(pending.id, data=RED_UPLOAD)
    return Red(file_id=f.id, batch_file_id=g.id, store_id=store.id, batch_id=batch.id, upload_id=upload.id,
               part_id=part.id, pending_upload_id=pending.id)


@pytest.fixture(scope="module")
def blue(blue_client) -> Blue:
    """Blue's own objects: one file in its own store, attached through a batch."""
    f = blue_client.files.create(file=("blue.txt", BLUE_TEXT), purpose="assistants")
    store = blue_client.vector_stores.create(name="blue-store")
    batch = blue_client.vector_stores.file_batches.create(store.id, file_ids=[f.id])
    assert batch.status == "completed", batch
    return Blue(file_id=f.id, store_id=store.id, batch_id=batch.id)


def _red_state(c: openai.OpenAI, red: Red) -> dict:
    """Everything red can observe about its objects (no call here changes last_active_at)."""
    vsf = c.vector_stores.files
    return {
        "file": c.files.retrieve(red.file_id).model_dump(),
        "batch_file": c.files.retrieve(red.batch_file_id).model_dump(),
        "content": c.files.content(red.file_id).read(),
        "store": c.vector_stores.retrieve(red.store_id).model_dump(),
        "store_files": sorted((x.id, x.status) for x in vsf.list(vector_store_id=red.store_id)),
        "store_file": vsf.retrieve(red.file_id, vector_store_id=red.store_id).model_dump(),
        "store_file_content": [x.model_dump() for x in vsf.content(red.file_id, vector_store_id=red.store_id)],
        "batch": c.vector_stores.file_batches.retrieve(red.batch_id, vector_store_id=red.store_id).model_dump(),
        "batch_files": [x.id for x in c.vector_stores.file_batches.list_files(red.batch_id,
                                                                               vector_store_id=red.store_id)],
        "files": sorted(x.id for x in c.files.list()),
    }


def _attacks(c: openai.OpenAI, red: Red, blue: Blue) -> list[tuple[str, Callable[[], object]]]:
    """Every route, called by blue with red's ids (and red/blue mixtures)."""
    vs, vsf, fb = c.vector_stores, c.vector_stores.files, c.vector_stores.file_batches
    r, b = red, blue
    return [
        ("files.retrieve", lambda: c.files.retrieve(r.file_id)),
        ("files.content", lambda: c.files.content(r.file_id)),
        ("files.delete", lambda: c.files.delete(r.file_id)),
        ("files.delete(batch file)", lambda: c.files.delete(r.batch_file_id)),
        ("vector_stores.retrieve", lambda: vs.retrieve(r.store_id)),
        ("vector_stores.update", lambda: vs.update(r.store_id, name="pwned", metadata={"owner": "blue"})),
        ("vector_stores.update(expires)", lambda: vs.update(r.store_id, expires_after={"anchor": "last_active_at",
                                                                                        "days": 1})),
        ("vector_stores.delete", lambda: vs.delete(r.store_id)),
        ("vector_stores.search", lambda: vs.search(r.store_id, query=RED_TEXT.decode())),
        ("vector_stores.create(file_ids=red)", lambda: vs.create(name="steal", file_ids=[r.file_id])),
        ("files.create(red file -> blue store)", lambda: vsf.create(vector_store_id=b.store_id, file_id=r.file_id)),
        ("files.create(blue file -> red store)", lambda: vsf.create(vector_store_id=r.store_id, file_id=b.file_id)),
        ("files.create(red file -> red store)", lambda: vsf.create(vector_store_id=r.store_id, file_id=r.file_id)),
        ("files.retrieve", lambda: vsf.retrieve(r.file_id, vector_store_id=r.store_id)),
        ("files.retrieve(blue store)", lambda: vsf.retrieve(r.file_id, vector_store_id=b.store_id)),
        ("files.update", lambda: vsf.update(r.file_id, vector_store_id=r.store_id, attributes={"pwned": True})),
        ("files.update(blue store)", lambda: vsf.update(r.file_id, vector_store_id=b.store_id, attributes={"x": 1})),
        ("files.delete", lambda: vsf.delete(r.file_id, vector_store_id=r.store_id)),
        ("files.delete(blue store)", lambda: vsf.delete(r.file_id, vector_store_id=b.store_id)),
        ("files.content", lambda: vsf.content(r.file_id, vector_store_id=r.store_id)),
        ("files.content(blue store)", lambda: vsf.content(r.file_id, vector_store_id=b.store_id)),
        ("files.list", lambda: vsf.list(vector_store_id=r.store_id)),
        ("file_batches.create(blue file -> red store)", lambda: fb.create(r.store_id, file_ids=[b.file_id])),
        ("file_batches.create(red file -> blue store)", lambda: fb.create(b.store_id, file_ids=[r.file_id])),
        ("file_batches.create(files=[red])", lambda: fb.create(b.store_id, files=[{"file_id": r.file_id}])),
        ("file_batches.retrieve", lambda: fb.retrieve(r.batch_id, vector_store_id=r.store_id)),
        ("file_batches.retrieve(blue store)", lambda: fb.retrieve(r.batch_id, vector_store_id=b.store_id)),
        ("file_batches.cancel", lambda: fb.cancel(r.batch_id, vector_store_id=r.store_id)),
        ("file_batches.cancel(blue store)", lambda: fb.cancel(r.batch_id, vector_store_id=b.store_id)),
        ("file_batches.list_files", lambda: fb.list_files(r.batch_id, vector_store_id=r.store_id)),
        ("file_batches.list_files(blue store)", lambda: fb.list_files(r.batch_id, vector_store_id=b.store_id)),
        ("uploads.parts.create", lambda: c.uploads.parts.create(r.upload_id, data=b"blue bytes")),
        ("uploads.complete", lambda: c.uploads.complete(r.upload_id, part_ids=[r.part_id])),
        ("uploads.cancel", lambda: c.uploads.cancel(r.upload_id)),
        ("uploads.cancel(pending)", lambda: c.uploads.cancel(r.pending_upload_id)),
        ("uploads.parts.create(pending)", lambda: c.uploads.parts.create(r.pending_upload_id, data=RED_UPLOAD)),
    ]


def _red_uploads(api_settings) -> list[tuple]:
    """Red's uploads with their status and part count (no API route reads an upload back)."""
    with db.connect(api_settings) as owner:
        return owner.execute("SELECT u.id, u.status, u.bytes, u.file_id, (SELECT count(*) FROM upload_parts p "
                             "WHERE p.upload_id = u.id) FROM uploads u WHERE u.tenant_id = 'red' ORDER BY u.id"
                             ).fetchall()


def test_blue_gets_404_for_every_route_with_red_ids(api_settings, red_client, blue_client, red, blue):
    before = _red_state(red_client, red)
    uploads_before = _red_uploads(api_settings)
    assert [(status, parts) for _, status, _, _, parts in uploads_before] == [("pending", 1), ("pending", 1)]
    failures = []
    for name, call in _attacks(blue_client, red, blue):
        try:
            result = call()
        except openai.NotFoundError as exc:
            assert exc.status_code == 404 and exc.type == "invalid_request_error"
            continue
        except openai.APIStatusError as exc:
            failures.append(f"{name}: {exc.status_code} {exc.message}")
            continue
        failures.append(f"{name}: succeeded with {result!r}"[:300])
    assert not failures, "\n".join(failures)

    assert _red_state(red_client, red) == before
    assert _red_uploads(api_settings) == uploads_before
    store = red_client.vector_stores.retrieve(red.store_id)
    assert store.name == "red-store" and store.metadata == {"owner": "red"} and store.expires_after is None
    assert store.file_counts.completed == 2 and store.file_counts.total == 2
    hits = red_client.vector_stores.search(red.store_id, query=RED_TEXT.decode()).data
    assert hits[0].file_id == red.file_id and RED_TEXT.decode() in hits[0].content[0].text
    assert hits[0].attributes in ({}, None)
    # blue's own store holds only blue's file (red's could not be attached)
    assert [x.id for x in blue_client.vector_stores.files.list(vector_store_id=blue.store_id)] == [blue.file_id]
    # blue cannot complete its own upload with red's part either
    mine = blue_client.uploads.create(bytes=len(RED_UPLOAD), filename="x.txt", mime_type="text/plain",
                                      purpose="assistants")
    with pytest.raises(openai.BadRequestError):
        blue_client.uploads.complete(mine.id, part_ids=[red.part_id])
    # red's upload is still pending with its one part: red completes it and gets exactly its bytes
    done = red_client.uploads.complete(red.upload_id, part_ids=[red.part_id])
    assert done.status == "completed" and done.file is not None
    assert red_client.files.content(done.file.id).read() == RED_UPLOAD
    assert done.file.id not in {x.id for x in blue_client.files.list()}


def test_blue_lists_never_show_red(red_client, blue_client, red, blue):
    red_ids = {red.file_id, red.batch_file_id, red.store_id, red.batch_id}
    blue_files = [x.id for x in blue_client.files.list()]
    blue_stores = [x.id for x in blue_client.vector_stores.list()]
    assert blue.file_id in blue_files and blue.store_id in blue_stores
    assert not red_ids & set(blue_files) and not red_ids & set(blue_stores)
    for order in ("asc", "desc"):
        assert not red_ids & {x.id for x in blue_client.files.list(order=order, limit=1).data}
        assert not red_ids & {x.id for x in blue_client.vector_stores.list(order=order, limit=1).data}
    # red's ids as cursors page blue's own data only
    assert not red_ids & {x.id for x in blue_client.files.list(after=red.file_id).data}
    assert not red_ids & {x.id for x in blue_client.vector_stores.list(after=red.store_id).data}
    assert not red_ids & {x.id for x in blue_client.vector_stores.list(before=red.store_id).data}
    with pytest.raises(openai.BadRequestError):  # a cursor of another kind names no place in the list
        blue_client.vector_stores.list(after=red.file_id)
    assert [x.id for x in blue_client.vector_stores.file_batches.list_files(blue.batch_id,
                                                                           vector_store_id=blue.store_id)] \
        == [blue.file_id]
    # and red sees none of blue's
    assert blue.file_id not in {x.id for x in red_client.files.list()}
    assert blue.store_id not in {x.id for x in red_client.vector_stores.list()}


def test_blue_search_never_returns_red_chunks(blue_client, red, blue):
    for query in (RED_TEXT.decode(), RED_BATCH_TEXT.decode(), [RED_TEXT.decode(), "octarine florins"]):
        for ranker in ("auto", "none"):
            page = blue_client.vector_stores.search(blue.store_id, query=query, max_num_results=50,
                                                    ranking_options={"ranker": ranker})
            for hit in page.data:
                assert hit.file_id == blue.file_id
                text = " ".join(c.text for c in hit.content)
                assert "red" not in text.lower() and "octarine" not in text and "zeppelin" not in text
    # blue's own text is found, so the search itself works
    page = blue_client.vector_stores.search(blue.store_id, query=BLUE_TEXT.decode())
    assert page.data and page.data[0].file_id == blue.file_id


# ----------------------------------------------------------------------------------------------------------------
# The database wall

TABLES = ("chunks", "files", "vector_stores", "vector_store_files", "keyword_stats", "embedding_cache",
          "file_batches", "file_batch_files", "tenants", "uploads", "upload_parts")


def _owner_counts(conn: psycopg.Connection, tenant: str) -> dict[str, int]:
    """Rows of ``tenant`` per table, counted by the owner (who row-level security does not limit)."""
    counts = {}
    for table in TABLES:
        if table == "keyword_stats":
            query = ("SELECT count(*) FROM keyword_stats k JOIN vector_stores s ON s.id = k.vector_store_id "
                     "WHERE s.tenant_id = %s")
        elif table == "tenants":
            query = "SELECT count(*) FROM tenants WHERE id = %s"
        else:
            query = f"SELECT count(*) FROM {table} WHERE tenant_id = %s"
        counts[table] = conn.execute(query, (tenant,)).fetchone()[0]
    return counts


def test_database_wall_reads(api_settings, red, blue, blue_client):
    blue_client.vector_stores.search(blue.store_id, query="harpsichord")  # blue has cache rows, stats, etc.
    with db.connect(api_settings) as owner:
        red_rows, blue_rows = _owner_counts(owner, "red"), _owner_counts(owner, "blue")
        totals = {t: owner.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    # red has rows everywhere the wall must hide (embedding_cache too: chunk embeddings are cached per tenant)
    for table in TABLES:
        assert red_rows[table] > 0, table
    assert sum(red_rows.values()) + sum(blue_rows.values()) == sum(totals.values())
    with db.tenant_connection(api_settings, "blue") as conn:
        seen = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        assert seen == blue_rows, (seen, blue_rows, red_rows, totals)
        assert seen["chunks"] > 0 and seen["files"] > 0  # blue sees its own rows: the filter is not "nothing"
        for t in TABLES:
            if t not in ("keyword_stats", "tenants"):
                assert conn.execute(f"SELECT count(*) FROM {t} WHERE tenant_id = 'red'").fetchone()[0] == 0, t
        assert conn.execute("SELECT count(*) FROM chunks WHERE text ILIKE '%octarine%'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM keyword_stats WHERE vector_store_id = %s",
                            (red.store_id,)).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM files WHERE id = %s", (red.file_id,)).fetchone()[0] == 0


def test_database_wall_writes(api_settings, red, blue):
    with db.connect(api_settings) as owner:
        before = _owner_counts(owner, "red")
        red_store_name = owner.execute("SELECT name FROM vector_stores WHERE id = %s", (red.store_id,)).fetchone()
    with db.tenant_connection(api_settings, "blue") as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO files (id, tenant_id, filename, bytes, sha256) "
                         "VALUES ('file-planted', 'red', 'x.txt', 1, 'x')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO vector_stores (id, tenant_id, embedding_model, embedding_dim) "
                         "VALUES ('vs_planted', 'red', 'm', 3)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO tenants (id) VALUES ('mallory')")
        # moving one of blue's own rows to red is refused as well (WITH CHECK)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("UPDATE files SET tenant_id = 'red' WHERE id = %s", (blue.file_id,))
        # red's rows are invisible to UPDATE and DELETE: nothing happens
        assert conn.execute("UPDATE vector_stores SET name = 'pwned' WHERE id = %s", (red.store_id,)).rowcount == 0
        assert conn.execute("UPDATE vector_stores SET name = 'pwned' WHERE tenant_id = 'red'").rowcount == 0
        assert conn.execute("DELETE FROM chunks WHERE tenant_id = 'red'").rowcount == 0
        assert conn.execute("DELETE FROM files WHERE id = %s", (red.file_id,)).rowcount == 0
        assert conn.execute("DELETE FROM keyword_stats WHERE vector_store_id = %s", (red.store_id,)).rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute("SELECT * FROM api_keys")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
            conn.execute("DELETE FROM api_keys")
    with db.connect(api_settings) as owner:
        assert _owner_counts(owner, "red") == before
        assert owner.execute("SELECT name FROM vector_stores WHERE id = %s", (red.store_id,)).fetchone() \
            == red_store_name
        assert owner.execute("SELECT count(*) FROM files WHERE id = 'file-planted'").fetchone()[0] == 0


def test_database_wall_role(api_settings):
    """The role a request runs as cannot step around the policies by itself.

    Here (locally and in tests) the pool connects as the table owner and ``SET ROLE engram_app``; the session user
    is still the owner, so ``RESET ROLE`` *would* get back to it — which only code running SQL on the pooled
    connection can do, and the API's code never does. Deployed, the API connects *as* ``engram_app`` (a login
    role), so there is no other role to go back to. What we can assert is the role itself: ``current_user`` is
    ``engram_app``, which is not superuser, has no BYPASSRLS, owns none of the tables, and is not a member of the
    owner role (so it cannot ``SET ROLE`` to it).
    """
    with db.tenant_connection(api_settings, "blue") as conn:
        current, session, tenant = conn.execute(
            "SELECT current_user, session_user, current_setting(%s)", (db.TENANT_SETTING,)).fetchone()
        assert current == db.APP_ROLE and tenant == "blue"
        super_, bypass, inherit_owner = conn.execute(
            "SELECT rolsuper, rolbypassrls, pg_has_role(%s, %s, 'MEMBER') FROM pg_roles WHERE rolname = %s",
            (db.APP_ROLE, session, db.APP_ROLE)).fetchone()
        assert (super_, bypass, inherit_owner) == (False, False, False)
        owned = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner = %s",
                             (db.APP_ROLE,)).fetchone()[0]
        assert owned == 0
        unprotected = conn.execute(
            "SELECT array_agg(relname::text ORDER BY relname) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r' AND NOT c.relrowsecurity "
            "AND has_table_privilege(%s, c.oid, 'SELECT')", (db.APP_ROLE,)).fetchone()[0]
        assert not unprotected, f"tables engram_app can read without row-level security: {unprotected}"
