"""Shared read-only knowledge (migrations/0014_shared_stores.sql), both walls, through the official SDK over real
HTTP and on tenant connections.

Tenant "lib" owns a store an operator shares; tenant "reader" may then retrieve it by id and search it — with the
same results, scores, filenames and attributes the owner gets, on every search path (exhaustive and top-k BM25,
exact and HNSW vectors) — but every other route on it answers 403 ``vector_store_read_only`` (the store is
visible, so "not found" would be untrue), its Files stay "not found", and the owner's data is unchanged. The
database enforces the same on a tenant connection: reads of the store's chunks, statistics and postings, no row
of its files, no write at all. Unsharing hides it again (404, nothing visible).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import openai
import psycopg
import pytest

from chalicelib import deps
from chalicelib.errors import NotFoundError, PermissionDeniedError
from chalicelib.search import keyword
from chalicelib.search.backends import for_backend
from chalicelib.store import db, vector_stores
from tests.conftest import BOTH_BACKENDS

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

# The library's documents: every one mentions "glacier", so one query reaches them all.
LIB_DOCS = {
    "moraine.txt": ("A glacier leaves a moraine of rock and gravel where its ice stops advancing. "
                    "Terminal moraines mark the furthest reach of the glacier.", {"topic": "landforms", "year": 2020}),
    "calving.txt": ("Calving happens when blocks of ice break off the glacier front into the sea. "
                    "Tidewater glaciers calve icebergs all summer.", {"topic": "ice", "year": 2021}),
    "crevasse.txt": ("A crevasse is a deep crack in a glacier, opened where the ice flows over a bump in its bed.",
                     {"topic": "ice", "year": 2022}),
    "cirque.txt": ("A cirque is the bowl a glacier carves at the head of a valley; a tarn lake often fills it.",
                   {"topic": "landforms", "year": 2023}),
}
READER_TEXT = b"The reader's own notes: the glacier museum opens at nine on Saturdays."
QUERIES = ["glacier", "crevasse crack in the ice", ["icebergs calving", "tarn lake in a cirque"]]


@dataclass
class Library:
    store_id: str
    unshared_id: str                 # another store of the owner's, never shared
    files: dict[str, str]            # filename -> file id
    batch_id: str


@dataclass
class Reader:
    store_id: str
    file_id: str


@pytest.fixture(scope="module")
def owner(make_client) -> openai.OpenAI:
    return make_client("lib")


@pytest.fixture(scope="module")
def reader(make_client) -> openai.OpenAI:
    return make_client("reader")


def _share(api_settings, store_id: str, shared: bool) -> vector_stores.VectorStore:
    """What ``engram stores share|unshare`` does: the operator (table owner) flips the flag."""
    with db.connect(api_settings) as conn:
        return vector_stores.set_shared(conn, store_id, shared, by="ops-test" if shared else None)


@pytest.fixture(scope="module")
def library(owner, api_settings) -> Library:
    store = owner.vector_stores.create(name="glaciology", metadata={"team": "geo"})
    files = {}
    for name, (text, attributes) in list(LIB_DOCS.items())[:3]:
        file_id = owner.files.create(file=(name, text.encode()), purpose="assistants").id
        attached = owner.vector_stores.files.create(vector_store_id=store.id, file_id=file_id, attributes=attributes)
        assert attached.status == "completed"
        files[name] = file_id
    name = "cirque.txt"
    files[name] = owner.files.create(file=(name, LIB_DOCS[name][0].encode()), purpose="assistants").id
    batch = owner.vector_stores.file_batches.create(store.id, files=[{"file_id": files[name],
                                                                      "attributes": LIB_DOCS[name][1]}])
    assert batch.status == "completed"
    unshared = owner.vector_stores.create(name="private-notes", file_ids=[files["moraine.txt"]])
    shared = _share(api_settings, store.id, True)
    assert shared.shared and shared.shared_by == "ops-test" and shared.shared_at is not None
    return Library(store.id, unshared.id, files, batch.id)


@pytest.fixture(scope="module")
def own(reader) -> Reader:
    """The reader's own store, with one file."""
    f = reader.files.create(file=("museum.txt", READER_TEXT), purpose="assistants")
    store = reader.vector_stores.create(name="reader-notes", file_ids=[f.id])
    return Reader(store.id, f.id)


def _pages(c: openai.OpenAI, store_id: str) -> list[list[dict]]:
    """Search results for every query and ranking: exact wire data."""
    pages = []
    for query in QUERIES:
        for options in ({}, {"ranking_options": {"ranker": "none"}},
                        {"ranking_options": {"hybrid_search": {"embedding_weight": 0, "text_weight": 1}}},
                        {"ranking_options": {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}}},
                        {"filters": {"type": "eq", "key": "topic", "value": "ice"}},
                        {"filters": {"type": "gte", "key": "year", "value": 2022}, "max_num_results": 2}):
            page = c.vector_stores.search(store_id, query=query, **options)
            pages.append([hit.model_dump() for hit in page.data])
    return pages


def test_reader_retrieves_and_searches_the_shared_store_as_its_owner_does(owner, reader, library):
    mine, theirs = owner.vector_stores.retrieve(library.store_id), reader.vector_stores.retrieve(library.store_id)
    assert theirs.model_dump() == mine.model_dump()
    assert theirs.name == "glaciology" and theirs.file_counts.completed == 4 and theirs.file_counts.total == 4
    assert theirs.metadata == {"team": "geo"} and theirs.usage_bytes > 0 and theirs.status == "completed"

    expected = _pages(owner, library.store_id)
    assert _pages(reader, library.store_id) == expected
    first = expected[0]
    assert {hit["filename"] for hit in first} == set(LIB_DOCS)  # every file, by its name (for citations)
    by_name = {hit["filename"]: hit for hit in first}
    for name, (text, attributes) in LIB_DOCS.items():
        assert by_name[name]["file_id"] == library.files[name] and by_name[name]["attributes"] == attributes
        assert by_name[name]["content"][0]["text"] == text
    filtered = expected[4]
    assert filtered and {hit["filename"] for hit in filtered} == {"calving.txt", "crevasse.txt"}


@pytest.mark.parametrize("path", ["top-k postings and HNSW", "exhaustive and exact"])
def test_every_search_path_gives_the_reader_the_owners_results(owner, reader, library, api_settings, monkeypatch,
                                                              path):
    """The keyword leg's top-k walks the store's postings and keyword_stats, the vector leg its HNSW index: both
    must see the shared store's rows for the reader exactly as for the owner."""
    if path.startswith("top-k"):
        monkeypatch.setattr(keyword, "EXHAUSTIVE_MAX_ROWS", 0)
        deps.set_settings(dataclasses.replace(api_settings, exact_scan_max_rows=0))
    try:
        expected = _pages(owner, library.store_id)
        assert expected[0] and _pages(reader, library.store_id) == expected
    finally:
        deps.set_settings(api_settings)


def test_reader_searches_its_own_store_as_before(reader, own, library):
    page = reader.vector_stores.search(own.store_id, query="glacier museum Saturdays", max_num_results=50)
    assert [hit.file_id for hit in page.data] == [own.file_id]  # none of the shared store's chunks leak in


def test_shared_stores_are_not_listed_for_other_tenants(owner, reader, library, own):
    assert [s.id for s in reader.vector_stores.list()] == [own.store_id]
    assert library.store_id in {s.id for s in owner.vector_stores.list()}
    assert library.files["moraine.txt"] not in {f.id for f in reader.files.list()}


def _owner_state(c: openai.OpenAI, reader: openai.OpenAI, library: Library) -> dict:
    """Everything the owner can observe about the shared store, and the reader's searches of it (no call here
    changes last_active_at: the reader's searches do not count as activity)."""
    vsf = c.vector_stores.files
    return {
        "store": c.vector_stores.retrieve(library.store_id).model_dump(),
        "files": {f: c.files.retrieve(i).model_dump() for f, i in library.files.items()},
        "content": c.files.content(library.files["crevasse.txt"]).read(),
        "store_files": sorted((x.id, x.status, str(x.attributes)) for x in vsf.list(vector_store_id=library.store_id)),
        "batch": c.vector_stores.file_batches.retrieve(library.batch_id, vector_store_id=library.store_id)
        .model_dump(),
        "search": _pages(reader, library.store_id)[:2],
    }


def _writes(c: openai.OpenAI, lib: Library, own: Reader) -> list[tuple[str, Callable[[], object]]]:
    """Every route but retrieve and search on the shared store, called by the reader: 403."""
    vs, vsf, fb = c.vector_stores, c.vector_stores.files, c.vector_stores.file_batches
    s, f = lib.store_id, lib.files["crevasse.txt"]
    return [
        ("vector_stores.update(name)", lambda: vs.update(s, name="pwned")),
        ("vector_stores.update(metadata)", lambda: vs.update(s, metadata={"team": "reader"})),
        ("vector_stores.update(expires)", lambda: vs.update(s, expires_after={"anchor": "last_active_at", "days": 1})),
        ("vector_stores.delete", lambda: vs.delete(s)),
        ("files.create(own file)", lambda: vsf.create(vector_store_id=s, file_id=own.file_id)),
        ("files.create(owner's file)", lambda: vsf.create(vector_store_id=s, file_id=f)),
        ("files.list", lambda: vsf.list(vector_store_id=s)),
        ("files.retrieve", lambda: vsf.retrieve(f, vector_store_id=s)),
        ("files.update", lambda: vsf.update(f, vector_store_id=s, attributes={"topic": "pwned"})),
        ("files.delete", lambda: vsf.delete(f, vector_store_id=s)),
        ("files.content", lambda: vsf.content(f, vector_store_id=s)),
        ("file_batches.create", lambda: fb.create(s, file_ids=[own.file_id])),
        ("file_batches.retrieve", lambda: fb.retrieve(lib.batch_id, vector_store_id=s)),
        ("file_batches.cancel", lambda: fb.cancel(lib.batch_id, vector_store_id=s)),
        ("file_batches.list_files", lambda: fb.list_files(lib.batch_id, vector_store_id=s)),
    ]


def _hidden(c: openai.OpenAI, lib: Library, own: Reader) -> list[tuple[str, Callable[[], object]]]:
    """The owner's Files (never shared) and its other store, as the reader: 404 like any other tenant's."""
    f = lib.files["crevasse.txt"]
    return [
        ("files.retrieve", lambda: c.files.retrieve(f)),
        ("files.content", lambda: c.files.content(f)),
        ("files.delete", lambda: c.files.delete(f)),
        ("vector_stores.create(file_ids=owner's)", lambda: c.vector_stores.create(name="copy", file_ids=[f])),
        ("files.create(owner's file -> own store)",
         lambda: c.vector_stores.files.create(vector_store_id=own.store_id, file_id=f)),
        ("unshared store: retrieve", lambda: c.vector_stores.retrieve(lib.unshared_id)),
        ("unshared store: search", lambda: c.vector_stores.search(lib.unshared_id, query="glacier")),
        ("unshared store: update", lambda: c.vector_stores.update(lib.unshared_id, name="pwned")),
    ]


def _refusals(calls, expected: type[openai.APIStatusError], status: int) -> list[str]:
    failures = []
    for name, call in calls:
        try:
            result = call()
        except expected as exc:
            assert exc.status_code == status and exc.type == "invalid_request_error", name
            if status == 403:
                assert exc.code == vector_stores.READ_ONLY_CODE and "read-only" in exc.message, name
            continue
        except openai.APIStatusError as exc:
            failures.append(f"{name}: {exc.status_code} {exc.message}")
            continue
        failures.append(f"{name}: succeeded with {result!r}"[:300])
    return failures


def test_reader_writes_and_file_reads_are_refused_and_change_nothing(owner, reader, library, own):
    before = _owner_state(owner, reader, library)
    failures = _refusals(_writes(reader, library, own), openai.PermissionDeniedError, 403)
    failures += _refusals(_hidden(reader, library, own), openai.NotFoundError, 404)
    assert not failures, "\n".join(failures)
    assert _owner_state(owner, reader, library) == before
    assert [x.id for x in reader.vector_stores.files.list(vector_store_id=own.store_id)] == [own.file_id]
    assert [s.id for s in reader.vector_stores.list()] == [own.store_id]  # "copy" was never created


def _visible(conn: psycopg.Connection, store_id: str) -> dict[str, int]:
    """Rows of the store visible on ``conn``, per table."""
    def one(query: str) -> int:
        return conn.execute(query, (store_id,)).fetchone()[0]

    return {
        "vector_stores": one("SELECT count(*) FROM vector_stores WHERE id = %s"),
        "chunks": one("SELECT count(*) FROM chunks WHERE vector_store_id = %s"),
        "keyword_stats": one("SELECT count(*) FROM keyword_stats WHERE vector_store_id = %s"),
        "chunk_postings": one("SELECT count(*) FROM chunk_postings p JOIN vector_stores s "
                              "ON s.partition_key = p.partition_key WHERE s.id = %s"),
        "vector_store_files": one("SELECT count(*) FROM vector_store_files WHERE vector_store_id = %s"),
        "files": one("SELECT count(*) FROM files f JOIN vector_store_files a ON a.file_id = f.id "
                     "WHERE a.vector_store_id = %s"),
        "file_batches": one("SELECT count(*) FROM file_batches WHERE vector_store_id = %s"),
        "shared_store_files": one("SELECT count(*) FROM shared_store_files WHERE vector_store_id = %s"),
    }


def test_database_wall_reads(api_settings, library, own):
    with db.connect(api_settings) as conn:
        everything = _visible(conn, library.store_id)
    in_postgres = for_backend(api_settings.vector_backend, api_settings, 0).in_postgres
    if not in_postgres:  # the backend holds its own keyword index: no postings in Postgres
        assert everything["chunk_postings"] == 0
    # the owner's view: rows in every table
    assert all(n for table, n in everything.items() if in_postgres or table != "chunk_postings"), everything
    with db.tenant_connection(api_settings, "reader") as conn:
        seen = _visible(conn, library.store_id)
        # what searching needs, exactly the owner's rows ...
        for table in ("vector_stores", "chunks", "keyword_stats", "chunk_postings", "shared_store_files"):
            assert seen[table] == everything[table], table
        # ... and none of its files, attachments or batches
        assert seen["vector_store_files"] == seen["files"] == seen["file_batches"] == 0
        assert conn.execute("SELECT count(*) FROM files WHERE tenant_id = 'lib'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM vector_store_files WHERE tenant_id = 'lib'").fetchone()[0] == 0
        # the owner's other store stays invisible, row and chunks
        assert _visible(conn, library.unshared_id) == dict.fromkeys(everything, 0)
        assert conn.execute("SELECT filename FROM shared_store_files WHERE vector_store_id = %s ORDER BY 1",
                            (library.store_id,)).fetchall() == [(name,) for name in sorted(LIB_DOCS)]
        assert conn.execute("SELECT count(*) FROM shared_store_files WHERE vector_store_id <> %s",
                            (library.store_id,)).fetchone()[0] == 0
        # the reader's own rows are still there
        assert _visible(conn, own.store_id)["files"] == 1


def _owner_rows(api_settings, store_id: str) -> tuple:
    with db.connect(api_settings) as conn:
        return (conn.execute("SELECT name, metadata, expires_after, shared, chunk_count, keyword_length "
                             "FROM vector_stores WHERE id = %s", (store_id,)).fetchone(),
                _visible(conn, store_id),
                conn.execute("SELECT sum(df) FROM keyword_stats WHERE vector_store_id = %s", (store_id,)).fetchone(),
                conn.execute("SELECT count(*), sum(length(text)) FROM chunks WHERE vector_store_id = %s",
                             (store_id,)).fetchone())


def test_database_wall_writes(api_settings, library, own):
    s = library.store_id
    before = _owner_rows(api_settings, s)
    refused = [
        ("INSERT INTO vector_store_files (tenant_id, vector_store_id, file_id, chunking_strategy) "
         "VALUES ('reader', %(s)s, %(own_file)s, '{}')"),
        ("INSERT INTO chunks (tenant_id, vector_store_id, file_id, chunk_index, text, token_count, char_start, "
         "char_end, embedding_dim, embedding, keywords, keyword_length) SELECT 'reader', vector_store_id, file_id, "
         "99, 'planted glacier lie', 3, 0, 3, 384, embedding, to_tsvector('planted glacier lie'), 3 "
         "FROM chunks WHERE vector_store_id = %(s)s LIMIT 1"),
        "INSERT INTO keyword_stats (vector_store_id, lexeme, df) VALUES (%(s)s, 'planted', 1)",
        ("INSERT INTO chunk_postings (tenant_id, partition_key, lexeme, impact, chunk_id) "
         "SELECT 'reader', partition_key, 'glacier', 99, 1 FROM vector_stores WHERE id = %(s)s"),
        "INSERT INTO file_batches (id, tenant_id, vector_store_id) VALUES ('vsfb_planted', 'reader', %(s)s)",
        # moving the reader's own rows into the shared store
        "UPDATE vector_store_files SET vector_store_id = %(s)s WHERE vector_store_id = %(own)s",
        "UPDATE chunks SET vector_store_id = %(s)s WHERE vector_store_id = %(own)s",
        # sharing is an operator's act: the API's role may not share its own store, nor create one shared
        "UPDATE vector_stores SET shared = true, shared_at = now() WHERE id = %(own)s",
        ("INSERT INTO vector_stores (id, tenant_id, embedding_model, embedding_dim, shared, shared_at) "
         "VALUES ('vs_planted', 'reader', 'm', 3, true, now())"),
    ]
    untouched = [  # rows the reader can read but not change: no row qualifies
        "UPDATE vector_stores SET name = 'pwned' WHERE id = %(s)s",
        "UPDATE vector_stores SET shared = false, shared_at = NULL WHERE id = %(s)s",
        "DELETE FROM vector_stores WHERE id = %(s)s",
        "UPDATE chunks SET text = 'pwned' WHERE vector_store_id = %(s)s",
        "DELETE FROM chunks WHERE vector_store_id = %(s)s",
        "UPDATE keyword_stats SET df = 0 WHERE vector_store_id = %(s)s",
        "DELETE FROM keyword_stats WHERE vector_store_id = %(s)s",
        ("DELETE FROM chunk_postings WHERE partition_key = "
         "(SELECT partition_key FROM vector_stores WHERE id = %(s)s)"),
        "UPDATE vector_store_files SET status = 'failed' WHERE vector_store_id = %(s)s",
        "DELETE FROM vector_store_files WHERE vector_store_id = %(s)s",
        "DELETE FROM files WHERE tenant_id = 'lib'",
    ]
    params = {"s": s, "own": own.store_id, "own_file": own.file_id}
    with db.tenant_connection(api_settings, "reader") as conn:
        for statement in refused:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement, params)
        for statement in untouched:
            assert conn.execute(statement, params).rowcount == 0, statement
    assert _owner_rows(api_settings, s) == before
    with db.connect(api_settings) as conn:
        assert conn.execute("SELECT count(*) FROM chunks WHERE tenant_id = 'reader' AND vector_store_id = %s",
                            (s,)).fetchone()[0] == 0
        assert conn.execute("SELECT shared FROM vector_stores WHERE id = %s", (own.store_id,)).fetchone()[0] is False


def test_owner_keeps_full_control_and_the_reader_sees_its_changes(owner, reader, library, api_settings):
    # attach a new file while shared: the reader finds it; detach it: gone for both
    extra = owner.files.create(file=("esker.txt", b"An esker is a ridge of glacier meltwater gravel."),
                               purpose="assistants")
    attached = owner.vector_stores.files.create(vector_store_id=library.store_id, file_id=extra.id,
                                                attributes={"topic": "landforms"})
    assert attached.status == "completed"
    hits = reader.vector_stores.search(library.store_id, query="esker meltwater ridge").data
    assert hits[0].file_id == extra.id and hits[0].filename == "esker.txt"
    assert reader.vector_stores.retrieve(library.store_id).file_counts.total == 5
    owner.vector_stores.files.delete(extra.id, vector_store_id=library.store_id)
    hits = reader.vector_stores.search(library.store_id, query="esker meltwater ridge", max_num_results=50).data
    assert extra.id not in {hit.file_id for hit in hits}
    # rename: the reader sees the new name; the owner's writes do not unshare it
    renamed = owner.vector_stores.update(library.store_id, name="glaciology-2")
    assert renamed.name == "glaciology-2" and reader.vector_stores.retrieve(library.store_id).name == "glaciology-2"
    owner.vector_stores.update(library.store_id, name="glaciology")
    with db.connect(api_settings) as conn:
        assert vector_stores.get(conn, "lib", library.store_id).shared


def test_unsharing_hides_it_again_and_sharing_restores_it(owner, reader, library, own, api_settings):
    shared_at = _share(api_settings, library.store_id, True).shared_at  # sharing again keeps the first time
    unshared = _share(api_settings, library.store_id, False)
    try:
        assert not unshared.shared and unshared.shared_at is None and unshared.shared_by is None
        failures = _refusals([("retrieve", lambda: reader.vector_stores.retrieve(library.store_id)),
                              ("search", lambda: reader.vector_stores.search(library.store_id, query="glacier")),
                              *_writes(reader, library, own)], openai.NotFoundError, 404)
        assert not failures, "\n".join(failures)
        with db.tenant_connection(api_settings, "reader") as conn:
            assert set(_visible(conn, library.store_id).values()) == {0}
        # the owner notices nothing
        assert owner.vector_stores.retrieve(library.store_id).file_counts.completed == 4
        assert owner.vector_stores.search(library.store_id, query="glacier").data
    finally:
        again = _share(api_settings, library.store_id, True)
    assert again.shared and again.shared_at != shared_at
    assert reader.vector_stores.search(library.store_id, query="crevasse").data[0].filename == "crevasse.txt"


def test_sharing_needs_the_operator(api_settings, library):
    # even the owner's API role cannot
    with db.tenant_connection(api_settings, "lib") as conn, pytest.raises(PermissionDeniedError):
        vector_stores.set_shared(conn, library.unshared_id, True, by="lib")
    with db.connect(api_settings) as conn:
        assert not vector_stores.get(conn, "lib", library.unshared_id).shared
        with pytest.raises(NotFoundError):
            vector_stores.set_shared(conn, "vs_doesnotexist", True)
        assert [s.id for s in vector_stores.list_shared(conn)] == [library.store_id]


def test_an_agent_profile_may_name_a_shared_store_as_file_search_may(reader, library, api_settings, make_key):
    """A shared store is usable wherever a store id is accepted for reading: a profile's ``file_search`` may name
    it (the profile stores the id; searching it is what ``file_search`` already may do). Another tenant's unshared
    store stays a 404, and the profile never lets the reader write to the shared one."""
    import httpx

    headers = {"Authorization": f"Bearer {make_key('reader')}"}
    with httpx.Client(base_url=str(reader.base_url), headers=headers, timeout=30) as http:
        tools = [{"type": "file_search", "vector_store_ids": [library.store_id]}]
        created = http.post("/agents", json={"name": "glacier guide", "tools": tools})
        assert created.status_code == 200, created.text
        agent = created.json()
        assert agent["tools"][0]["vector_store_ids"] == [library.store_id]
        hidden = http.post("/agents", json={"name": "snoop", "tools": [
            {"type": "file_search", "vector_store_ids": [library.unshared_id]}]})
        assert hidden.status_code == 404 and hidden.json()["error"]["param"] == "tools.0.vector_store_ids.0"
        assert http.delete(f"/agents/{agent['id']}").status_code == 200
