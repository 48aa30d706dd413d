"""``file_search`` over a store another tenant shared (migrations/0014_shared_stores.sql): the reader names it in
``vector_store_ids`` next to its own store, the server searches both (each store's rows under its owner's tenant,
the reader's row-level security identity throughout), results and citations carry the shared file's filename, and
once the operator unshares it the same request is refused like any unknown store."""

from __future__ import annotations

import openai
import pytest

from chalicelib.store import db, vector_stores
from tests.fakes.chat_server import call, text, tool_calls

SHARED = b"Company handbook: the octarine expense limit is nine hundred florins per trip."
SHARED_2 = b"Company handbook: octarine travel must be booked through the front desk."
OWN = b"My own notes: my octarine trip to the coast is booked for May."


@pytest.fixture(scope="module")
def stores(make_client, client, api_settings):
    """A handbook store of tenant "hq", shared by the operator; the reader's (``client``, tenant acme) own store."""
    hq = make_client("hq")
    limit = hq.files.create(file=("handbook.txt", SHARED), purpose="assistants")
    booking = hq.files.create(file=("booking.txt", SHARED_2), purpose="assistants")
    handbook = hq.vector_stores.create(name="handbook")
    for f, section in ((limit, "money"), (booking, "travel")):
        attached = hq.vector_stores.files.create(vector_store_id=handbook.id, file_id=f.id,
                                                 attributes={"section": section})
        assert attached.status == "completed"
    mine = client.files.create(file=("notes.txt", OWN), purpose="assistants")
    own = client.vector_stores.create(name="notes", file_ids=[mine.id])
    with db.connect(api_settings) as conn:
        vector_stores.set_shared(conn, handbook.id, True, by="ops")
    return {"shared": handbook.id, "own": own.id, "limit": limit.id, "booking": booking.id, "mine": mine.id}


def _tool_message(request: dict) -> str:
    return next(m for m in reversed(request["messages"]) if m["role"] == "tool")["content"]


def test_file_search_over_own_and_shared_stores(client, fake, stores):
    fake.push(tool_calls(call("file_search", {"queries": ["octarine expense limit", "octarine trip"]})),
              text(f"The limit is nine hundred florins <|{stores['limit']}|>; your trip is in May "
                   f"<|{stores['mine']}|>."))
    r = client.responses.create(
        model="fake-model", input="What is my octarine budget?", include=["file_search_call.results"],
        tools=[{"type": "file_search", "vector_store_ids": [stores["own"], stores["shared"]], "max_num_results": 10}])
    search, message = r.output
    assert search.status == "completed"
    by_file = {res.file_id: res for res in search.results}
    assert set(by_file) == {stores["limit"], stores["booking"], stores["mine"]}  # both stores searched
    assert by_file[stores["limit"]].filename == "handbook.txt" and "nine hundred" in by_file[stores["limit"]].text
    assert by_file[stores["limit"]].attributes == {"section": "money"}
    assert by_file[stores["mine"]].filename == "notes.txt"
    cited = {(a.file_id, a.filename) for a in message.content[0].annotations}
    assert cited == {(stores["limit"], "handbook.txt"), (stores["mine"], "notes.txt")}
    seen = _tool_message(fake.requests[1])
    assert f"<|{stores['limit']}|>" in seen and f"<|{stores['mine']}|>" in seen and "nine hundred" in seen


def test_filters_apply_to_the_shared_store(client, fake, stores):
    fake.push(tool_calls(call("file_search", {"queries": ["octarine"]})), text("Book at the front desk."))
    r = client.responses.create(
        model="fake-model", input="How do I book?", include=["file_search_call.results"],
        tools=[{"type": "file_search", "vector_store_ids": [stores["shared"]],
                "filters": {"type": "eq", "key": "section", "value": "travel"}}])
    assert [res.file_id for res in r.output[0].results] == [stores["booking"]]


def test_unshared_store_is_refused_then_usable_again(client, fake, stores, api_settings, make_client):
    with db.connect(api_settings) as conn:
        vector_stores.set_shared(conn, stores["shared"], False)
    try:
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="fake-model", input="Budget?",
                                    tools=[{"type": "file_search", "vector_store_ids": [stores["shared"]]}])
        assert caught.value.body["param"] == "tools[0].vector_store_ids[0]"
        assert fake.requests == []  # refused before any model call
        # its owner still uses it as before
        fake.push(tool_calls(call("file_search", {"queries": ["octarine expense limit"]})), text("Nine hundred."))
        r = make_client("hq").responses.create(
            model="fake-model", input="Limit?", include=["file_search_call.results"],
            tools=[{"type": "file_search", "vector_store_ids": [stores["shared"]]}])
        assert r.output[0].results[0].file_id == stores["limit"]
    finally:
        with db.connect(api_settings) as conn:
            vector_stores.set_shared(conn, stores["shared"], True, by="ops")
    fake.push(tool_calls(call("file_search", {"queries": ["octarine expense limit"]})), text("Nine hundred."))
    r = client.responses.create(model="fake-model", input="Limit?", include=["file_search_call.results"],
                                tools=[{"type": "file_search", "vector_store_ids": [stores["shared"]]}])
    assert r.output[0].results[0].file_id == stores["limit"]
