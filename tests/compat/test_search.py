"""Vector store search through the official SDK over real HTTP (OPENAI-COMPAT.md §2, §7.5–6): queries, result
limits, the attribute filter grammar, ranking options, scores, empty and expired stores."""

from __future__ import annotations

import dataclasses

import openai
import pytest

from tests.conftest import BOTH_BACKENDS

VECTOR_BACKENDS = BOTH_BACKENDS  # every test here runs on pgvector and on Qdrant

# Five files, one sentence each, all mentioning "harbour" so one query reaches every file.
DOCS = {
    "alpha.txt": ("The harbour pilot guides tankers past the breakwater at dawn.",
                  {"region": "north", "year": 2021, "rating": 4.5, "public": True}),
    "beta.txt": ("The harbour master logs every fishing boat that docks overnight.",
                 {"region": "south", "year": 2022, "rating": 3.0, "public": False}),
    "gamma.txt": ("Cranes at the harbour unload containers from cargo ships.",
                  {"region": "north", "year": 2023, "rating": 2.5, "public": True}),
    "delta.txt": ("A lighthouse near the harbour warns sailors of the reef.",
                  {"region": "east", "year": 2024, "rating": 5, "public": False}),
    "epsilon.txt": ("Ferries leave the harbour every hour for the islands.",
                    {"region": "west", "year": 2020}),
}


@pytest.fixture(scope="module")
def corpus(client):
    """A store holding :data:`DOCS`; returns ``(store_id, {filename: file_id})``."""
    store = client.vector_stores.create(name="search-corpus")
    ids = {}
    for name, (text, attributes) in DOCS.items():
        file_id = client.files.create(file=(name, text.encode()), purpose="assistants").id
        attached = client.vector_stores.files.create(vector_store_id=store.id, file_id=file_id,
                                                     attributes=attributes)
        assert attached.status == "completed"
        ids[name] = file_id
    return store.id, ids


def search(client, store_id, **kwargs):
    kwargs.setdefault("query", "harbour")
    kwargs.setdefault("max_num_results", 50)
    return client.vector_stores.search(store_id, **kwargs)


def names(page, ids) -> set[str]:
    by_id = {v: k for k, v in ids.items()}
    return {by_id[hit.file_id] for hit in page.data}


def test_query_string_and_list(client, corpus):
    store_id, ids = corpus
    page = client.vector_stores.search(store_id, query="lighthouse reef")
    assert page.object == "vector_store.search_results.page" and page.search_query == ["lighthouse reef"]
    assert page.has_more is False and page.next_page is None
    assert page.data[0].file_id == ids["delta.txt"] and page.data[0].filename == "delta.txt"
    assert page.data[0].content[0].type == "text" and "lighthouse" in page.data[0].content[0].text
    assert page.data[0].attributes == DOCS["delta.txt"][1]
    several = client.vector_stores.search(store_id, query=["lighthouse reef", "cargo cranes"])
    assert several.search_query == ["lighthouse reef", "cargo cranes"]
    assert {ids["delta.txt"], ids["gamma.txt"]} <= {h.file_id for h in several.data[:2]}


@pytest.mark.parametrize("query", ["", "   ", [], [""]])
def test_empty_query_is_rejected(client, corpus, query):
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.search(corpus[0], query=query)
    assert info.value.param and info.value.param.startswith("query")


def test_max_num_results(client, corpus):
    store_id, _ = corpus
    assert len(search(client, store_id, max_num_results=1).data) == 1
    assert len(search(client, store_id, max_num_results=3).data) == 3
    assert len(search(client, store_id, max_num_results=50).data) == 5
    assert len(client.vector_stores.search(store_id, query="harbour").data) == 5  # default 10
    for bad in (0, 51, -1):
        with pytest.raises(openai.BadRequestError) as info:
            search(client, store_id, max_num_results=bad)
        assert info.value.param == "max_num_results"


@pytest.mark.parametrize("filters,expected", [
    ({"type": "eq", "key": "region", "value": "north"}, {"alpha.txt", "gamma.txt"}),
    ({"type": "ne", "key": "region", "value": "north"}, {"beta.txt", "delta.txt", "epsilon.txt"}),
    ({"type": "eq", "key": "year", "value": 2022}, {"beta.txt"}),
    ({"type": "eq", "key": "rating", "value": 5.0}, {"delta.txt"}),  # 5 and 5.0 compare equal
    ({"type": "gt", "key": "year", "value": 2022}, {"gamma.txt", "delta.txt"}),
    ({"type": "gte", "key": "year", "value": 2022}, {"beta.txt", "gamma.txt", "delta.txt"}),
    ({"type": "lt", "key": "rating", "value": 3}, {"gamma.txt"}),
    ({"type": "lte", "key": "rating", "value": 3}, {"beta.txt", "gamma.txt"}),
    ({"type": "gte", "key": "region", "value": "south"}, {"beta.txt", "epsilon.txt"}),
    ({"type": "in", "key": "region", "value": ["east", "west"]}, {"delta.txt", "epsilon.txt"}),
    ({"type": "in", "key": "year", "value": [2020, 2024, 1999]}, {"delta.txt", "epsilon.txt"}),
    ({"type": "nin", "key": "region", "value": ["north", "south"]}, {"delta.txt", "epsilon.txt"}),
    ({"type": "eq", "key": "public", "value": True}, {"alpha.txt", "gamma.txt"}),
    ({"type": "eq", "key": "public", "value": False}, {"beta.txt", "delta.txt"}),
    ({"type": "ne", "key": "public", "value": True}, {"beta.txt", "delta.txt", "epsilon.txt"}),
    ({"type": "eq", "key": "missing", "value": "x"}, set()),
    ({"type": "eq", "key": "year", "value": "2022"}, set()),  # a string never equals a number
    ({"type": "and", "filters": [{"type": "eq", "key": "region", "value": "north"},
                                 {"type": "gte", "key": "year", "value": 2022}]}, {"gamma.txt"}),
    ({"type": "or", "filters": [{"type": "eq", "key": "region", "value": "east"},
                                {"type": "lt", "key": "year", "value": 2021}]}, {"delta.txt", "epsilon.txt"}),
    ({"type": "or", "filters": [
        {"type": "and", "filters": [{"type": "eq", "key": "public", "value": True},
                                    {"type": "gt", "key": "rating", "value": 4}]},
        {"type": "and", "filters": [{"type": "eq", "key": "region", "value": "south"},
                                    {"type": "nin", "key": "year", "value": [2021, 2023]}]},
    ]}, {"alpha.txt", "beta.txt"}),
    ({"type": "and", "filters": [
        {"type": "ne", "key": "region", "value": "west"},
        {"type": "or", "filters": [{"type": "lte", "key": "rating", "value": 2.5},
                                   {"type": "eq", "key": "year", "value": 2024}]},
    ]}, {"gamma.txt", "delta.txt"}),
])
def test_filters_return_exactly_the_matching_files(client, corpus, filters, expected):
    store_id, ids = corpus
    page = search(client, store_id, filters=filters)
    assert names(page, ids) == expected
    assert all(h.attributes == DOCS[h.filename][1] for h in page.data)


@pytest.mark.parametrize("filters,param", [
    ({"type": "like", "key": "region", "value": "n"}, "filters.type"),
    ({"type": "eq", "value": "north"}, "filters.key"),
    ({"type": "eq", "key": "region"}, "filters.value"),
    ({"type": "in", "key": "region", "value": "north"}, "filters.value"),
    ({"type": "gt", "key": "public", "value": True}, "filters.value"),
    ({"type": "eq", "key": "region", "value": {"nested": 1}}, "filters.value"),
    ({"type": "and", "filters": []}, "filters.filters"),
    ({"type": "or", "filters": [{"type": "eq", "key": "a", "value": 1}, {"type": "eq", "key": "", "value": 1}]},
     "filters.filters[1].key"),
])
def test_bad_filters_are_400(client, corpus, filters, param):
    with pytest.raises(openai.BadRequestError) as info:
        search(client, corpus[0], filters=filters)
    assert info.value.param and info.value.param.startswith("filters")
    assert info.value.param == param


def test_ranking_options(client, corpus):
    store_id, ids = corpus
    everything = search(client, store_id, query="harbour pilot tankers")
    scores = [h.score for h in everything.data]
    assert all(0.0 <= s <= 1.0 for s in scores) and len(set(scores)) > 1
    assert everything.data[0].file_id == ids["alpha.txt"]
    cut = (max(scores) + min(scores)) / 2
    kept = search(client, store_id, query="harbour pilot tankers", ranking_options={"score_threshold": cut})
    assert kept.data and all(h.score >= cut for h in kept.data)
    # The threshold drops results; it never reorders the rest.
    assert [h.file_id for h in kept.data] == [h.file_id for h in everything.data if h.score >= cut]
    assert all(h.score == 1.0 for h in search(client, store_id, query="harbour pilot tankers",
                                               ranking_options={"score_threshold": 1.0}).data)
    for ranker in ("none", "auto", "default-2024-11-15"):
        page = search(client, store_id, query="harbour pilot tankers",
                      ranking_options={"ranker": ranker, "score_threshold": 0.0})
        assert page.data and page.data[0].file_id == ids["alpha.txt"]
    for bad, param in (({"ranker": "best"}, "ranking_options.ranker"),
                       ({"score_threshold": 1.5}, "ranking_options.score_threshold"),
                       ({"score_threshold": -0.1}, "ranking_options.score_threshold")):
        with pytest.raises(openai.BadRequestError) as info:
            search(client, store_id, ranking_options=bad)
        assert info.value.param == param


def test_rewrite_query_is_accepted(client, corpus):
    store_id, ids = corpus
    page = client.vector_stores.search(store_id, query="ferries to the islands", rewrite_query=True)
    assert page.search_query and page.data[0].file_id == ids["epsilon.txt"]


MODES = {"hybrid": {}, "vector": {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}},
         "keyword": {"hybrid_search": {"embedding_weight": 0, "text_weight": 1}}}


@pytest.mark.parametrize("mode", MODES)
def test_scores_stay_in_range_for_unrelated_queries(client, corpus, mode):
    store_id, _ = corpus
    for query in ("quantum chromodynamics", "harbour harbour harbour", "the"):
        page = search(client, store_id, query=query, ranking_options=MODES[mode])
        scores = [h.score for h in page.data]
        assert all(0.0 <= s <= 1.0 for s in scores)
        if mode != "hybrid":  # one leg: relevance descends with that leg's evidence
            assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("mode", MODES)
def test_a_threshold_of_half_drops_nonsense_and_keeps_answers(client, corpus, mode):
    """Scores are relevance, comparable across queries: random words find nothing at 0.5, while a query its
    document answers finds that document first, above 0.5 (a rank score gives any query's best hit ≥ 0.5)."""
    store_id, ids = corpus
    half = {**MODES[mode], "score_threshold": 0.5}
    for nonsense in ("zebra quantum xylophone", "marmalade velocity orchestra", "gobbledygook"):
        assert search(client, store_id, query=nonsense, ranking_options=half).data == []
        assert all(h.score < 0.5 for h in search(client, store_id, query=nonsense, ranking_options=MODES[mode]).data)
    for query, name in (("lighthouse warns sailors of the reef", "delta.txt"),
                        ("cranes unload containers from cargo ships", "gamma.txt")):
        page = search(client, store_id, query=query, ranking_options=half)
        assert page.data and page.data[0].file_id == ids[name] and page.data[0].score >= 0.5
        assert len(page.data) < len(DOCS)  # the other harbour files are not relevant enough


def test_hybrid_results_are_the_fused_candidates_in_relevance_order(client, corpus):
    """Fusion picks the candidates, relevance orders them: a hybrid page holds reciprocal rank fusion's first
    results (of the two legs, as weighted) with scores that never rise down the page."""
    from chalicelib.search.fusion import reciprocal_rank_fusion

    store_id, _ = corpus
    for query in ("harbour pilot tankers", "fishing boat at the harbour", "ferries islands reef"):
        legs = [[h.file_id for h in search(client, store_id, query=query, ranking_options=MODES[m]).data]
                for m in ("vector", "keyword")]
        for weights, options in (((1.0, 1.0), {}),
                                 ((3.0, 1.0), {"ranking_options": {"hybrid_search": {"embedding_weight": 3,
                                                                                      "text_weight": 1}}})):
            hybrid = search(client, store_id, query=query, **options).data
            fused = [f for f, _ in reciprocal_rank_fusion([(weights[0], legs[0]), (weights[1], legs[1])])]
            assert hybrid and sorted(h.file_id for h in hybrid) == sorted(fused[:len(hybrid)])
            assert [h.score for h in hybrid] == sorted((h.score for h in hybrid), reverse=True)


def _fused_groups(pages, weights) -> list[set[str]]:
    """Reciprocal rank fusion of single-leg pages as the ranking fuses its legs — rows of equal score share a
    rank (search.ranking.tied_ranks) — as groups of equal fused score, best first (the order within a group is the
    stable key's, which the test cannot see)."""
    from chalicelib.search.fusion import reciprocal_rank_fusion
    from chalicelib.search.ranking import TIE_RELATIVE, tied_ranks

    fused = reciprocal_rank_fusion([(w, [h.file_id for h in page]) for w, page in zip(weights, pages)],
                                   ranks=[tied_ranks([h.score for h in page], TIE_RELATIVE) for page in pages])
    groups: list[set[str]] = []
    last = None
    for file_id, score in fused:
        if last is None or abs(score - last) > 1e-12:
            groups.append(set())
        groups[-1].add(file_id)
        last = score
    return groups


def _in_groups(ids: list[str], groups: list[set[str]]) -> bool:
    """Whether ``ids`` run through ``groups`` in order, each group's members in any order (the last one partly)."""
    i = 0
    for group in groups:
        take = ids[i:i + len(group)]
        if set(take) - group:
            return False
        i += len(take)
        if i >= len(ids):
            return True
    return i >= len(ids)


def test_ranker_none_keeps_fusion_order_and_the_default_ranker_reorders(client, corpus):
    """``ranker: none`` is fusion without the re-ranking step: the page is reciprocal rank fusion's order of the two
    legs (rows of equal score in a leg sharing one rank); ``auto`` and ``default-2024-11-15`` (the same ranker) order
    the same candidates by relevance. At least one query here is one where the two orders differ, so the test tells
    them apart."""
    store_id, _ = corpus
    differ = 0
    for query in ("harbour pilot tankers", "fishing boat at the harbour", "ferries islands reef",
                  "lighthouse cargo ships", "the harbour at dawn"):
        legs = [search(client, store_id, query=query, ranking_options=MODES[m]).data for m in ("vector", "keyword")]
        plain = search(client, store_id, query=query, ranking_options={"ranker": "none"}).data
        assert _in_groups([h.file_id for h in plain], _fused_groups(legs, (1.0, 1.0))), query
        pages = [search(client, store_id, query=query, ranking_options={"ranker": r}).data
                 for r in ("auto", "default-2024-11-15")]
        assert [(h.file_id, h.score) for h in pages[0]] == [(h.file_id, h.score) for h in pages[1]]
        assert sorted((h.file_id, h.score) for h in pages[0]) == sorted((h.file_id, h.score) for h in plain)
        differ += [h.file_id for h in pages[0]] != [h.file_id for h in plain]
    assert differ > 0


def test_empty_store(client):
    store = client.vector_stores.create(name="empty")
    page = client.vector_stores.search(store.id, query="anything")
    assert page.data == [] and page.search_query == ["anything"]
    page = client.vector_stores.search(store.id, query="anything",
                                       filters={"type": "eq", "key": "a", "value": 1})
    assert page.data == []


def test_bad_and_foreign_store_ids(client, make_client, corpus):
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.search("abc123", query="x")
    assert info.value.param == "vector_store_id"
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.search("vs_" + "0" * 24, query="x")
    with pytest.raises(openai.NotFoundError):
        make_client("umbrella").vector_stores.search(corpus[0], query="harbour")


def test_expired_store(client, api_settings):
    from chalicelib.jobs import runner
    from chalicelib.store.db import connect

    store = client.vector_stores.create(name="expiring", expires_after={"anchor": "last_active_at", "days": 1})
    attached = client.vector_stores.files.create(
        vector_store_id=store.id,
        file_id=client.files.create(file=("e.txt", b"Expiring harbour notes."), purpose="assistants").id)
    assert client.vector_stores.search(store.id, query="harbour").data
    assert client.vector_stores.retrieve(store.id).status == "completed"
    with connect(api_settings) as conn:
        conn.execute("UPDATE vector_stores SET expires_at = now() - interval '1 minute' WHERE id = %s", (store.id,))
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.search(store.id, query="harbour")
    assert info.value.param == "vector_store_id"
    assert client.vector_stores.retrieve(store.id).status == "expired"
    with pytest.raises(openai.BadRequestError):
        client.vector_stores.files.create(vector_store_id=store.id, file_id=attached.id)
    # Reads do not revive it.
    assert client.vector_stores.retrieve(store.id).status == "expired"
    # Housekeeping keeps it for the retention period, then deletes it.
    runner.run_job(api_settings, "expire_vector_stores", force=True)
    assert client.vector_stores.retrieve(store.id).status == "expired"
    removed = runner.run_job(dataclasses.replace(api_settings, expired_retention_s=0), "expire_vector_stores",
                             force=True)
    assert removed.counts["expired_stores"] >= 1
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.retrieve(store.id)
    assert client.files.retrieve(attached.id).id == attached.id  # the File outlives the store
