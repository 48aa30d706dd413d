"""The routes the console reads and acts through (issue 34), over real HTTP: the opt-in ``include`` values on
vector stores, their files and search (OpenAI's shape unchanged without them, checked with the strict SDK), a file's
chunks, memory entities, the list of stored responses, recall scores in ``usage.memory``, ``/v1/me``, the tenant's
limits and usage, the jobs and their runs, drop-folder syncs and errors — and who may call them: the operator's
routes refuse every key without ``operations`` (a full key too), and a second tenant sees none of the first's."""

from __future__ import annotations

import math

import httpx
import openai
import pytest

from chalicelib.access import FULL, Access
from chalicelib.store import api_keys, drop_errors, tenants
from chalicelib.store.db import connect

OPERATOR = Access({**FULL.permissions, "operations": "write"})
TEXTS = {
    "bm25.txt": "Rare words are weighted more than common ones: BM25 ranks a chunk by the rarity of the words it "
                "shares with the query, so ranking rewards rare terms.",
    "hnsw.md": "HNSW builds a layered graph of vectors; a search walks it greedily from the top layer down.",
}


@pytest.fixture(scope="module")
def keys(server, api_settings):
    """``keys(tenant, grants=None)`` → a new key (full access by default)."""

    def make(tenant: str, grants: Access | None = None) -> str:
        with connect(api_settings) as conn:
            return api_keys.create_key(conn, tenant, grants=grants)[1]

    return make


@pytest.fixture(scope="module")
def http(server):
    """``http(key)`` → an httpx client on the API root with that key."""
    made = []

    def make(key: str) -> httpx.Client:
        made.append(httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60))
        return made[-1]

    yield make
    for client in made:
        client.close()


@pytest.fixture(scope="module")
def corpus(make_client):
    """Tenant ``console``'s store with :data:`TEXTS` and one failed file: ``(client, store_id, {name: file_id})``."""
    client = make_client("console")
    store = client.vector_stores.create(name="handbook")
    ids = {}
    for name, text in TEXTS.items():
        ids[name] = client.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=(name, text.encode())).id
    broken = client.files.create(file=("broken.pdf", b"%PDF-1.4 this is not a PDF"), purpose="assistants")
    failed = client.vector_stores.files.create_and_poll(vector_store_id=store.id, file_id=broken.id)
    assert failed.status == "failed"
    ids["broken.pdf"] = broken.id
    return client, store.id, ids


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_search_without_include_is_openais_page_and_with_it_shows_both_legs(corpus, http, keys, hashing_embedder):
    client, store_id, ids = corpus
    query = "how are rare words weighted?"
    plain = client.vector_stores.search(store_id, query=query)  # strict SDK: OpenAI's shape
    assert plain.data and all(hit.model_extra in (None, {}) for hit in plain.data)
    api = http(keys("console"))
    raw = api.post(f"/vector_stores/{store_id}/search", json={"query": query}).json()
    assert all(set(hit) == {"file_id", "filename", "score", "attributes", "content"} for hit in raw["data"])

    found = api.post(f"/vector_stores/{store_id}/search",
                     json={"query": query, "include": ["score_details", "chunk"]}).json()
    assert [h["score"] for h in found["data"]] == [h["score"] for h in raw["data"]]  # the same search
    top = found["data"][0]
    assert top["file_id"] == ids["bm25.txt"]
    details = top["score_details"]
    assert 0 < details["vector"] <= 1 and 0 < details["keyword"] <= 1
    text = top["content"][0]["text"]
    # the vector part is the query's cosine to the chunk's embedding (the hashing embedder, as the server uses)
    query_vector, chunk_vector = hashing_embedder.embed([query, text])
    assert details["vector"] == pytest.approx(max(0.0, _cosine(query_vector, chunk_vector)), abs=1e-4)
    marked = [text[start:end] for start, end in details["matches"]]
    assert {"Rare", "words", "weighted", "rare"} <= set(marked) and "the" not in marked  # stems, no stop words
    assert "ranking" not in marked  # "rank" is not a query word
    assert top["chunk"]["index"] == 0 and top["chunk"]["char_start"] == 0

    # each leg alone: the other part is null, the evidence the same
    vector_only = api.post(f"/vector_stores/{store_id}/search", json={
        "query": query, "include": ["score_details"],
        "ranking_options": {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}}}).json()["data"]
    by_file = {h["file_id"]: h["score_details"] for h in found["data"]}
    assert all(h["score_details"]["keyword"] is None for h in vector_only)
    assert all(h["score_details"]["vector"] == pytest.approx(by_file[h["file_id"]]["vector"]) for h in vector_only
               if h["file_id"] in by_file)
    keyword_only = api.post(f"/vector_stores/{store_id}/search", json={
        "query": query, "include": ["score_details"],
        "ranking_options": {"hybrid_search": {"embedding_weight": 0, "text_weight": 1}}}).json()["data"]
    assert [h["file_id"] for h in keyword_only] == [ids["bm25.txt"]]  # the only file holding a query word
    assert keyword_only[0]["score_details"] == {"vector": None, "keyword": details["keyword"],
                                                "matches": details["matches"]}

    refused = api.post(f"/vector_stores/{store_id}/search", json={"query": query, "include": ["vectors"]})
    assert refused.status_code == 400 and refused.json()["error"]["param"].startswith("include")


def test_store_and_file_details_and_chunks(corpus, http, keys):
    client, store_id, ids = corpus
    assert client.vector_stores.retrieve(store_id).model_extra in (None, {})  # the SDK's shape by default
    api = http(keys("console"))
    store = api.get(f"/vector_stores/{store_id}", params={"include": "details"}).json()
    assert store["details"] == {"backend": "pgvector", "chunk_count": 2, "embedding_model": "hashing-384",
                                "embedding_dimension": 384, "shared": False}
    [listed] = [s for s in api.get("/vector_stores", params={"include[]": "details"}).json()["data"]
                if s["id"] == store_id]
    assert listed["details"] == store["details"]
    files = api.get(f"/vector_stores/{store_id}/files", params={"include": "details", "limit": 100}).json()["data"]
    by_name = {f["details"]["filename"]: f for f in files}
    assert set(by_name) == set(ids)
    assert by_name["bm25.txt"]["details"]["chunk_count"] == 1 and by_name["bm25.txt"]["last_error"] is None
    broken = by_name["broken.pdf"]
    assert broken["status"] == "failed" and broken["details"]["chunk_count"] == 0
    assert broken["last_error"]["code"] and broken["last_error"]["message"]
    one = api.get(f"/vector_stores/{store_id}/files/{ids['hnsw.md']}", params={"include": "details"}).json()
    assert one["details"]["filename"] == "hnsw.md"
    assert "details" not in api.get(f"/vector_stores/{store_id}/files/{ids['hnsw.md']}").json()

    chunks = api.get(f"/vector_stores/{store_id}/files/{ids['bm25.txt']}/chunks").json()
    assert chunks["object"] == "list" and chunks["has_more"] is False and chunks["first_id"] == 0
    [chunk] = chunks["data"]
    assert chunk["object"] == "vector_store.file.chunk" and chunk["text"] == TEXTS["bm25.txt"]
    assert chunk["index"] == 0 and chunk["token_count"] > 0 and chunk["char_end"] == len(TEXTS["bm25.txt"])
    assert api.get(f"/vector_stores/{store_id}/files/{ids['bm25.txt']}/chunks", params={"after": 0}).json()["data"] == []
    assert api.get(f"/vector_stores/{store_id}/files/{ids['broken.pdf']}/chunks").json()["data"] == []
    for params in ({"limit": 0}, {"limit": 101}, {"after": -1}, {"after": "x"}):
        answer = api.get(f"/vector_stores/{store_id}/files/{ids['bm25.txt']}/chunks", params=params)
        assert answer.status_code == 400, params
    assert api.get(f"/vector_stores/{store_id}/files/file-nope/chunks").status_code == 404
    assert api.get("/vector_stores", params={"include": "everything"}).status_code == 400


def test_a_files_chunks_page_in_order(make_client, http, keys):
    client = make_client("console-pages")
    store = client.vector_stores.create(name="long")
    text = " ".join(f"Sentence {i} about the lighthouse keeper and the tides." for i in range(400))
    attached = client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("long.txt", text.encode()),
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}})
    api = http(keys("console-pages"))
    seen, after = [], None
    while True:
        page = api.get(f"/vector_stores/{store.id}/files/{attached.id}/chunks",
                       params={"limit": 7, **({"after": after} if after is not None else {})}).json()
        seen += page["data"]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert [c["index"] for c in seen] == list(range(len(seen))) and len(seen) > 7
    assert all(a["char_end"] <= b["char_start"] + 1 for a, b in zip(seen, seen[1:]))


def test_memory_entities_and_recall_scores_of_a_stored_response(server, http, keys, make_client):
    api = http(keys("console-memory"))
    for user, texts in (("ada", ["I moved to Lisbon last year.", "I love cooking Indian food."]),
                        ("bob", ["I live in Oslo."])):
        assert api.post("/memories", json={"user_id": user, "infer": False,
                                           "messages": [{"role": "user", "content": t} for t in texts]}).status_code == 200
    api.post("/memories", json={"agent_id": "planner", "infer": False,
                                "messages": [{"role": "user", "content": "Plans are weekly."}]})
    found = api.get("/memories/entities").json()
    assert found["object"] == "list" and found["total"] == 3 and found["has_more"] is False
    by_id = {(e["type"], e["id"]): e for e in found["data"]}
    assert by_id[("user", "ada")]["memories"] == {"active": 2, "total": 2}
    assert by_id[("agent", "planner")]["object"] == "memory.entity"
    assert api.get("/memories/entities", params={"limit": 1, "offset": 1}).json()["has_more"] is True
    assert api.get("/memories/entities", params={"limit": 0}).status_code == 400
    bound = http(keys("console-memory", Access({**FULL.permissions}, {"user_id": "bob"})))
    assert [(e["type"], e["id"]) for e in bound.get("/memories/entities").json()["data"]] == [("user", "bob")]
    assert http(keys("console-memory-2")).get("/memories/entities").json() == {
        "object": "list", "data": [], "total": 0, "has_more": False}

    client = make_client("console-memory")
    conversation = client.conversations.create()
    answer = client.responses.create(model="engram-scripted", input="Where do I live?", conversation=conversation.id,
                                     extra_body={"memory": {"user_id": "ada", "top_k": 2, "score_threshold": 0.0}})
    memory = answer.usage.model_extra["memory"]
    assert memory["ids"] and len(memory["scores"]) == len(memory["ids"])
    searched = api.post("/memories/search", json={"user_id": "ada", "query": "Where do I live?"}).json()["data"]
    score_of = {m["id"]: m["score"] for m in searched}
    assert [score_of[i] for i in memory["ids"]] == pytest.approx(memory["scores"], abs=1e-3)  # recall scores as search
    stored = api.get(f"/responses/{answer.id}").json()
    assert stored["usage"]["memory"]["scores"] == memory["scores"]

    listed = api.get("/responses", params={"conversation": conversation.id}).json()
    assert [r["id"] for r in listed["data"]] == [answer.id]
    other = client.responses.create(model="engram-scripted", input="Hello")
    assert [r["id"] for r in api.get("/responses", params={"limit": 2}).json()["data"]] == [other.id, answer.id]
    assert [r["id"] for r in api.get("/responses", params={"order": "asc"}).json()["data"]] == [answer.id, other.id]
    assert api.get("/responses", params={"conversation": "conv_nope"}).status_code == 404
    assert api.get("/responses", params={"conversation": "nope"}).status_code == 400
    assert http(keys("console-memory-2")).get("/responses").json()["data"] == []


def test_me_limits_and_usage(corpus, http, keys):
    _, store_id, _ = corpus
    full = http(keys("console"))
    me = full.get("/me").json()
    assert me == {"object": "caller", "tenant_id": "console", "permissions": {
        "files": "write", "vector_stores": "write", "responses": "write", "memories": "write", "operations": "none"},
        "memory_scope": None, "operator": False}
    limits = full.get("/tenant/limits").json()
    assert limits["object"] == "tenant.limits" and limits["limits"] == limits["defaults"]
    usage = limits["usage"]["knowledge"]
    assert usage["vector_stores"] >= 1 and usage["files"] == 3 and usage["max_store_files"] == 3
    assert usage["storage_bytes"] > 0 and limits["usage"]["memory"] == {"active_memories": 0, "memories": 0,
                                                                         "archived_memories": 0}
    reader = http(keys("console", Access({"memories": "read"}, {"user_id": "ada"})))
    shown = reader.get("/tenant/limits").json()
    assert shown["usage"] == {"knowledge": None, "memory": None}  # neither the stores nor the whole tenant's memory

    # a full key cannot change them; an operator key can, for its own tenant only
    refused = full.post("/tenant/limits", json={"max_entries": 5})
    assert refused.status_code == 403 and "operations.write" in refused.json()["error"]["message"]
    operator = http(keys("console", OPERATOR))
    assert operator.get("/me").json()["operator"] is True
    changed = operator.post("/tenant/limits", json={"max_entries": 5, "auto_archive_days": 30}).json()
    assert changed["limits"]["max_entries"] == 5 and changed["limits"]["auto_archive_days"] == 30
    assert full.get("/tenant/limits").json()["limits"]["max_entries"] == 5
    assert http(keys("console-other")).get("/tenant/limits").json()["limits"]["max_entries"] == 10_000
    for body, param in (({"max_entries": 0}, "max_entries"), ({"nope": 3}, "nope"), ({"max_entries": "5"}, "max_entries"),
                        ({"max_entries": True}, "max_entries")):
        answer = operator.post("/tenant/limits", json=body)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == param, body
    assert operator.post("/tenant/limits", json={"max_entries": None}).json()["limits"]["max_entries"] == 10_000


def test_jobs_and_runs_for_operators_only(server, api_settings, http, keys):
    operator = http(keys("console-ops", OPERATOR))
    full = http(keys("console-ops"))
    for method, path in (("GET", "/jobs"), ("GET", "/jobs/consolidation/runs"), ("POST", "/jobs/consolidation/runs")):
        answer = full.request(method, path, json={} if method == "POST" else None)
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "insufficient_permissions", path
    jobs = operator.get("/jobs").json()
    names = [j["name"] for j in jobs["data"]]
    assert "consolidation" in names and "sync_drop_folder" in names
    ran = operator.post("/jobs/consolidation/runs", json={}).json()
    assert ran["object"] == "job.run" and ran["scope"] == "console-ops" and ran["status"] == "finished"
    assert set(ran["counts"]) == {"scopes", "groups", "merged"}
    [consolidation] = [j for j in operator.get("/jobs").json()["data"] if j["name"] == "consolidation"]
    [scope] = consolidation["scopes"]
    assert scope["scope"] == "console-ops" and scope["last_run"]["status"] == "finished" and not scope["running"]
    runs = operator.get("/jobs/consolidation/runs").json()
    assert [r["scope"] for r in runs["data"]] == ["console-ops"] and runs["data"][0]["status"] == "finished"

    # another tenant's runs are never shown, an all-tenants run is
    from chalicelib.jobs import runner

    runner.run_job(api_settings, "consolidation", tenant="console-elsewhere", force=True)
    runner.run_job(api_settings, "consolidation", force=True)
    scopes = [r["scope"] for r in operator.get("/jobs/consolidation/runs").json()["data"]]
    assert scopes == ["*", "console-ops"]
    other = http(keys("console-elsewhere", OPERATOR))
    assert [r["scope"] for r in other.get("/jobs/consolidation/runs").json()["data"]] == ["*", "console-elsewhere"]
    page = operator.get("/jobs/consolidation/runs", params={"limit": 1}).json()
    assert page["has_more"] is True
    rest = operator.get("/jobs/consolidation/runs", params={"before": page["last_id"]}).json()
    assert [r["scope"] for r in rest["data"]] == ["console-ops"]

    assert operator.post("/jobs/nope/runs", json={}).status_code == 404
    assert operator.post("/jobs/consolidation/runs", json={"tenant": "x"}).status_code == 400


def test_drop_folder_syncs_and_errors(server, api_settings, http, keys):
    from chalicelib.jobs import runner

    with connect(api_settings) as conn:
        tenants.set_drop_folder(conn, "console-drop", True)
        drop_errors.record(conn, tenant_id="console-drop", bucket="drops", key="console-drop/docs/a.json.engram.json",
                           event="e1", code="invalid_sidecar", message="The sidecar is not JSON.")
        drop_errors.record(conn, tenant_id="console-other", bucket="drops", key="console-other/x/b.txt", event="e2",
                           code="store_not_found", message="No store.")
    runner.run_job(api_settings, "sync_drop_folder", force=True)  # every tenant's (fails here: no bucket)
    api = http(keys("console-drop"))
    errors = api.get("/drop_folder/errors").json()["data"]
    assert [(e["key"], e["code"]) for e in errors] == [("console-drop/docs/a.json.engram.json", "invalid_sidecar")]
    runs = api.get("/drop_folder/syncs").json()["data"]
    assert runs and runs[0]["all_tenants"] is True and runs[0]["counts"] is None and runs[0]["error"] is None
    assert api.get("/drop_folder/errors", params={"limit": 51}).status_code == 400
    reader = http(keys("console-drop", Access({"memories": "write"})))
    assert reader.get("/drop_folder/errors").status_code == 403


def test_a_second_tenant_sees_none_of_the_first(corpus, http, keys):
    _, store_id, ids = corpus
    other = http(keys("console-second"))
    assert other.get("/vector_stores", params={"include": "details"}).json()["data"] == []
    assert other.get(f"/vector_stores/{store_id}", params={"include": "details"}).status_code == 404
    assert other.get(f"/vector_stores/{store_id}/files/{ids['bm25.txt']}/chunks").status_code == 404
    assert other.post(f"/vector_stores/{store_id}/search", json={"query": "rare", "include": ["score_details"]}
                      ).status_code == 404
    assert other.get("/drop_folder/errors").json()["data"] == []
    assert other.get("/tenant/limits").json()["usage"]["knowledge"]["files"] == 0


def test_the_console_page_and_files_need_no_key_and_carry_a_strict_policy(server):
    root = server.url.removesuffix("/v1")
    page = httpx.get(f"{root}/console")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "console/console.js" in page.text and "http" not in page.text.split("<body>")[0].replace("http-equiv", "")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy and "script-src 'self'" in policy
    for name, kind in (("console.js", "text/javascript"), ("console.css", "text/css")):
        asset = httpx.get(f"{root}/console/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
        assert "https://" not in asset.text and "http://" not in asset.text  # nothing fetched from elsewhere
    missing = httpx.get(f"{root}/console/secrets.txt")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "invalid_request_error"
    assert httpx.get(f"{root}/console", params={"x": "1"}).status_code == 400
    # the page is no back door: the API still needs a key
    assert httpx.get(f"{root}/v1/me").status_code == 401
    assert httpx.get(f"{root}/v1/vector_stores", headers={"Referer": f"{root}/console"}).status_code == 401


def test_a_key_without_reads_is_refused_by_the_console_routes_too(server, http, keys):
    none = http(keys("console-none", Access({})))
    assert none.get("/me").json()["permissions"] == {r: "none" for r in ("files", "vector_stores", "responses",
                                                                          "memories", "operations")}
    for path in ("/memories/entities", "/responses", "/drop_folder/syncs", "/jobs"):
        assert none.get(path).status_code == 403, path


def test_the_sdk_is_unchanged_on_the_routes_include_extends(corpus):
    client, store_id, ids = corpus
    listed = client.vector_stores.files.list(vector_store_id=store_id)
    assert {f.id for f in listed.data} == set(ids.values())
    with pytest.raises(openai.BadRequestError):
        client.vector_stores.search(store_id, query="rare", extra_body={"include": ["nope"]})
