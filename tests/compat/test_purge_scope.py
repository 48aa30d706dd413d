"""A purge acts on exactly the scope it parsed, and says which (issue: an empty or ``name[]`` scope parameter was
dropped and the purge ran on what was left, deleting other users' memories).

Over real HTTP, on a tenant holding memories of several users, agents and runs (and a second tenant that must never
be touched): the regressions as reported, then a property-based test (hypothesis) that generates query strings for
the three purge routes — the native ``DELETE /v1/memories``, mem0's ``delete_all`` (``DELETE /mem0/v1/memories/``)
and mem0's entity delete (``DELETE /mem0/v2/entities/{type}/{id}/``) — with empty values, array forms, repeats,
percent-encodings and extra names, and checks that a 200 deleted exactly what its echoed scope names (never more,
never less) and that any other answer deleted nothing.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from chalicelib.store.db import connect

pytestmark = [pytest.mark.filterwarnings("ignore:Do not use the `random` module")]

TENANT, OTHER = "purge-scope", "purge-scope-other"
USERS, AGENTS, RUNS = ("u1", "u2", "u3"), ("a1", "a2"), ("r1",)
# Every (user, agent, run) a memory may belong to: a user with or without an agent and a run, an agent alone, a run
# alone — 21 scopes, one memory each.
SCOPES = ([(u, a, r) for u in USERS for a in (None, *AGENTS) for r in (None, *RUNS)]
          + [(None, a, None) for a in AGENTS] + [(None, None, r) for r in RUNS])


def _populate(http: httpx.Client) -> None:
    """One memory per scope of :data:`SCOPES` (added as written)."""
    for i, (user, agent, run) in enumerate(SCOPES):
        ids = {k: v for k, v in (("user_id", user), ("agent_id", agent), ("run_id", run)) if v is not None}
        added = http.post("/v1/memories", json={"messages": f"Fact number {i} about the lighthouse.", "infer": False,
                                                **ids})
        assert added.status_code == 200, added.text


def _rows(api_settings, tenant: str) -> set[tuple[str, str | None, str | None, str | None]]:
    """Every memory of ``tenant``: ``(id, user_id, agent_id, run_id)`` (read as the table's owner)."""
    with connect(api_settings) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, user_id, agent_id, run_id FROM memories WHERE tenant_id = %s", (tenant,))
        return set(cur.fetchall())


def _matches(row: tuple[str, str | None, str | None, str | None], scope: dict[str, Any]) -> bool:
    """Whether a memory is inside an echoed scope (a null id matches any; ``all`` matches everything)."""
    if scope.get("all"):
        return True
    return all(scope.get(name) is None or scope[name] == value
               for name, value in zip(("user_id", "agent_id", "run_id"), row[1:]))


@pytest.fixture(scope="module")
def clients(server, make_key):
    """``(http, other)``: httpx clients at the server's root for the tenant under test and a second tenant, both
    populated."""
    root = server.url.removesuffix("/v1")
    http = httpx.Client(base_url=root, headers={"Authorization": f"Bearer {make_key(TENANT)}"}, timeout=60)
    other = httpx.Client(base_url=root, headers={"Authorization": f"Bearer {make_key(OTHER)}"}, timeout=60)
    _populate(other)
    yield http, other
    http.close()
    other.close()


@pytest.fixture()
def fresh(clients, api_settings):
    """The tenant under test holding exactly one memory per scope; ``(http, rows before)``."""
    http, _ = clients
    reset = http.delete("/v1/memories", params={"all": "true"})
    assert reset.status_code == 200, reset.text
    _populate(http)
    return http, _rows(api_settings, TENANT)


def _delete(http: httpx.Client, path: str, query: str) -> httpx.Response:
    return http.delete(f"{path}?{query}" if query else path)


@pytest.mark.parametrize("query", [
    "user_id=u1&agent_id[]=a1",                 # the array form of a scalar: was dropped → all of u1's deleted
    "user_id[]=u2&agent_id=a1",                 # was dropped → every user's memories under a1 deleted
    "user_id=u1&agent_id=",                     # an empty value
    "user_id=u1&agent_id",                      # a bare name
    "agent_id=a1&agent_id=a2",                  # a repeated scalar: took the last value
    "user_id=u1&user_id=u1",                    # repeated, even with the same value
    "user_id%5B%5D=u1",                         # the array form, percent-encoded
    "",                                         # no scope at all
    "all=false",                                # no scope, and not all
    "all=true&user_id=u1",                      # all and a scope: ambiguous
    "all=yes",                                  # not a boolean
    "all=true&all=true",
])
def test_native_purge_refuses_what_it_cannot_parse_exactly(fresh, api_settings, query):
    http, before = fresh
    response = _delete(http, "/v1/memories", query)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] and error["code"]
    assert _rows(api_settings, TENANT) == before


@pytest.mark.parametrize("query", [
    "user_id=u1&agent_id[]=a1", "user_id[]=u2&agent_id=a1", "user_id=u1&agent_id=", "user_id=u1&agent_id",
    "agent_id=a1&agent_id=a2", "", "app_id=x", "filters=", "filters={}",
])
def test_mem0_delete_all_refuses_what_it_cannot_parse_exactly(fresh, api_settings, query):
    http, before = fresh
    response = _delete(http, "/mem0/v1/memories/", query)
    assert response.status_code == 400, response.text
    assert _rows(api_settings, TENANT) == before


def test_a_named_scope_is_purged_exactly_and_echoed(fresh, api_settings):
    http, before = fresh
    response = http.delete("/v1/memories", params={"user_id": "u1", "agent_id": "a1"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["scope"] == {"user_id": "u1", "agent_id": "a1", "run_id": None, "all": False}
    deleted = before - _rows(api_settings, TENANT)
    assert {row[1:] for row in deleted} == {("u1", "a1", None), ("u1", "a1", "r1")}
    assert body["counts"]["memories"] == 2


def test_all_true_purges_every_scope_of_the_tenant_only(fresh, clients, api_settings):
    http, _ = fresh
    other_before = _rows(api_settings, OTHER)
    response = http.delete("/v1/memories", params={"all": "true"})
    assert response.status_code == 200, response.text
    assert response.json()["scope"] == {"user_id": None, "agent_id": None, "run_id": None, "all": True}
    assert response.json()["counts"]["memories"] == len(SCOPES)
    assert _rows(api_settings, TENANT) == set()
    assert _rows(api_settings, OTHER) == other_before


def test_mem0_purges_echo_their_scope(fresh, api_settings):
    http, before = fresh
    response = http.delete("/mem0/v1/memories/", params={"user_id": "u2", "agent_id": "*"})
    assert response.status_code == 200, response.text
    assert response.json()["scope"] == {"user_id": "u2", "agent_id": None, "run_id": None}
    assert {row[1:] for row in before - _rows(api_settings, TENANT)} == {s for s in SCOPES if s[0] == "u2"}
    entity = http.delete("/mem0/v2/entities/agent/a2/")
    assert entity.status_code == 200, entity.text
    assert entity.json()["scope"] == {"user_id": None, "agent_id": "a2", "run_id": None}
    assert all(row[2] != "a2" for row in _rows(api_settings, TENANT))


def test_repeated_scalars_and_array_forms_are_refused_on_every_route(server, make_key):
    headers = {"Authorization": f"Bearer {make_key(TENANT)}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
        for query in ("limit=5&limit=500", "limit[]=5", "limit=", "order=asc&order=desc"):
            response = http.get(f"/files?{query}")
            assert response.status_code == 400, (query, response.text)
            assert response.json()["error"]["param"] in ("limit", "order")
        # An array parameter OpenAI declares keeps both forms, repeated.
        for query in ("include[]=message.input_image.image_url&include[]=file_search_call.results",
                      "include=file_search_call.results&include=message.input_image.image_url"):
            assert http.get(f"/responses/resp_0000000000?{query}").status_code == 404
        assert http.get("/responses/resp_0000000000?include[]=").status_code == 400


# ---- the property: what a purge deletes is exactly what its echoed scope names ----

_NAMES = ("user_id", "agent_id", "run_id", "all", "app_id", "filters", "org_id", "user", "USER_ID")
_VALUES = ("u1", "u2", "a1", "a2", "r1", "", "*", "true", "false", "zz", "u1 ", "%75%31", "{'user_id': 'u1'}",
           '{"agent_id": "a1"}', '{"user_id": "u1", "agent_id": "a2"}', '{"AND": [{"run_id": "r1"}]}')


@st.composite
def parameters(draw) -> str:
    """One parameter: a well-formed scope id (two times in three), else any name (some with ``[]``, some
    percent-encoded) with ``=value``, ``=`` or nothing."""
    if draw(st.integers(0, 2)):
        name = draw(st.sampled_from(("user_id", "agent_id", "run_id")))
        return f"{name}={draw(st.sampled_from(USERS + AGENTS + RUNS + ('*',)))}"
    name = draw(st.sampled_from(_NAMES)) + draw(st.sampled_from(("", "", "", "[]", "[0]")))
    if draw(st.integers(0, 3)) == 0:
        name = urllib.parse.quote(name, safe="")
        name = name.replace("_", "%5F") if draw(st.booleans()) else name
    form = draw(st.sampled_from(("value", "value", "value", "empty", "bare")))
    if form == "value":
        return f"{name}={urllib.parse.quote(draw(st.sampled_from(_VALUES)), safe='%')}"
    return f"{name}=" if form == "empty" else name


def query_strings() -> st.SearchStrategy[str]:
    """A query string of 0-3 :func:`parameters`."""
    return st.lists(parameters(), max_size=3).map("&".join)


_ENTITY_PATHS = [f"/mem0/v2/entities/{kind}/{name}/" for kind, names in
                 (("user", USERS), ("agent", AGENTS), ("run", RUNS)) for name in names]
_PATHS = [*["/v1/memories", "/mem0/v1/memories/"] * 3, *_ENTITY_PATHS]


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(path=st.sampled_from(_PATHS), query=query_strings())
def test_a_purge_deletes_exactly_its_echoed_scope(clients, api_settings, path, query):
    http, _ = clients
    other_before = _rows(api_settings, OTHER)
    reset = http.delete("/v1/memories", params={"all": "true"})
    assert reset.status_code == 200, reset.text
    _populate(http)
    before = _rows(api_settings, TENANT)
    response = _delete(http, path, query)
    after = _rows(api_settings, TENANT)
    assert _rows(api_settings, OTHER) == other_before, "another tenant's memories changed"
    assert response.status_code < 500, response.text
    event(f"{response.status_code} on {path.rsplit('/', 3)[0]}")
    if response.status_code != 200:
        assert after == before, f"{response.status_code} but something was deleted"
        return
    scope = response.json()["scope"]
    assert scope.get("all") or any(scope[name] for name in ("user_id", "agent_id", "run_id"))
    deleted = before - after
    assert deleted == {row for row in before if _matches(row, scope)}, (query, scope)
