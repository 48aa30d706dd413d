"""Unknown query parameters, on every route and method of the app: a 400 ``unknown_parameter`` naming the parameter,
before the route runs (so nothing is read, written or deleted), as an unknown body field already is. Routes read
from the app's own route table, so a new route is covered the day it is added."""

from __future__ import annotations

import re

import httpx
import pytest

import app as application
from chalicelib.api.query import ANY, allowed

ROUTES = sorted((path, method, entry.view_function) for path, methods in application.app.routes.items()
                for method, entry in methods.items())


def _url(server, path: str) -> str:
    root = server.url.removesuffix("/v1")
    return root + re.sub(r"\{(\w+)\}", lambda m: f"{m.group(1)}_1", path)


@pytest.fixture(scope="module")
def every_permission(server, api_settings) -> str:
    """A key that may call every route (the operator's too), so the parameter check is what answers."""
    from chalicelib.access import FULL, Access
    from chalicelib.store import api_keys
    from chalicelib.store.db import connect

    with connect(api_settings) as conn:
        return api_keys.create_key(conn, "query-params", grants=Access({**FULL.permissions,
                                                                        "operations": "write"}))[1]


@pytest.mark.parametrize(("path", "method", "view"), ROUTES, ids=[f"{m} {p}" for p, m, _ in ROUTES])
def test_an_undeclared_parameter_is_refused_by_name(server, every_permission, path, method, view):
    if ANY in allowed(view):
        pytest.skip("a route that refuses every request (documented, mem0 adapter)")
    assert "zzz_typo" not in allowed(view)
    response = httpx.request(method, _url(server, path), params={"zzz_typo": "1"},
                             headers={"Authorization": f"Bearer {every_permission}"}, timeout=30)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == {"message": "Unknown parameter: 'zzz_typo'.", "type": "invalid_request_error",
                                        "param": "zzz_typo", "code": "unknown_parameter"}


def test_a_purge_with_a_typo_deletes_nothing(server, make_key):
    headers = {"Authorization": f"Bearer {make_key('query-purge')}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
        added = http.post("/memories", json={"messages": "Alice likes tea", "user_id": "alice", "infer": False})
        assert added.status_code == 200, added.text
        typo = http.delete("/memories", params={"user_id": "alice", "agnet_id": "x"})
        assert typo.status_code == 400 and typo.json()["error"]["param"] == "agnet_id"
        assert len(http.get("/memories", params={"user_id": "alice"}).json()["data"]) == 1
        assert http.delete("/memories", params={"user_id": "alice"}).json()["counts"]["memories"] == 1


def test_declared_parameters_still_work_including_array_forms(server, make_key):
    headers = {"Authorization": f"Bearer {make_key('query-ok')}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
        page = http.get("/memories", params={"user_id": "u", "limit": "5", "order": "asc", "include_inactive": "1"})
        assert page.status_code == 200, page.text
        assert http.get("/vector_stores", params={"limit": "2", "order": "desc"}).status_code == 200
        # the SDK's array form of include: include[]=...
        missing = http.get("/responses/resp_0000000000", params={"include[]": "file_search_call.results"})
        assert missing.status_code == 404
