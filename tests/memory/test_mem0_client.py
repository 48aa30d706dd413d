"""Every public method of the official ``mem0ai`` 2.2.1 clients — ``MemoryClient`` and ``AsyncMemoryClient`` and
their ``project`` managers — against Engram's mem0 adapter over real HTTP, sync and async: each one either works
(exercised and checked here, on real data) or answers a documented, deliberate refusal (a 400 the client raises as
``ValidationError``, saying what to use instead). :data:`STATUS` is the list, read from the clients' own source by
:func:`test_every_public_method_is_accounted_for`, so a client release with a new method fails here first."""

from __future__ import annotations

import asyncio
import atexit
import inspect
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

# Before mem0 is imported: no telemetry, and its settings folder (created at import) out of the home directory.
os.environ["MEM0_TELEMETRY"] = "false"
if "MEM0_DIR" not in os.environ:
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="engram-mem0-")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], True)

from mem0 import AsyncMemoryClient, MemoryClient
from mem0.client.project import AsyncProject, Project
from mem0.exceptions import MemoryNotFoundError, ValidationError

from tests.conftest import BOTH_BACKENDS
from tests.fakes.chat_server import text

WORKS, REFUSED, CLIENT_SIDE = "works", "refused", "raises NotImplementedError in the client"
# mem0ai 2.2.1: every public method of MemoryClient / AsyncMemoryClient, and what Engram does with it.
STATUS = {
    "add": WORKS, "get": WORKS, "get_all": WORKS, "search": WORKS, "update": WORKS, "delete": WORKS,
    "delete_all": WORKS, "history": WORKS, "users": WORKS, "delete_users": WORKS, "reset": WORKS,
    "batch_update": WORKS, "batch_delete": WORKS, "feedback": WORKS, "get_profile": WORKS,
    "generate_profile": WORKS, "get_profile_job": WORKS, "get_profile_settings": WORKS,
    "update_profile_settings": REFUSED, "sample_profiles": REFUSED, "create_memory_export": REFUSED,
    "get_memory_export": REFUSED, "get_summary": REFUSED, "get_project": REFUSED, "update_project": REFUSED,
    "get_webhooks": REFUSED, "create_webhook": REFUSED, "update_webhook": REFUSED, "delete_webhook": REFUSED,
    "chat": CLIENT_SIDE,
}
PROJECT_STATUS = {name: REFUSED for name in ("get", "create", "update", "delete", "get_members", "add_member",
                                             "update_member", "remove_member")}
# How each refused method is called (arguments as the client takes them).
REFUSALS: dict[str, Callable[[Any], Any]] = {
    "update_profile_settings": lambda c: c.update_profile_settings(enabled=True),
    "sample_profiles": lambda c: c.sample_profiles(limit=2),
    "create_memory_export": lambda c: c.create_memory_export('{"type": "object"}', user_id="u"),
    "get_memory_export": lambda c: c.get_memory_export(user_id="u"),
    "get_summary": lambda c: c.get_summary(filters={"user_id": "u"}),
    "get_project": lambda c: c.get_project(fields=["custom_instructions"]),
    "update_project": lambda c: c.update_project(custom_instructions="Be brief."),
    "get_webhooks": lambda c: c.get_webhooks(project_id="p"),
    "create_webhook": lambda c: c.create_webhook("https://example.com/hook", "hook", "p", ["memory_add"]),
    "update_webhook": lambda c: c.update_webhook(1, name="hook"),
    "delete_webhook": lambda c: c.delete_webhook(1),
    "project.get": lambda c: c.project.get(),
    "project.create": lambda c: c.project.create("new"),
    "project.update": lambda c: c.project.update(custom_instructions="Be brief."),
    "project.delete": lambda c: c.project.delete(),
    "project.get_members": lambda c: c.project.get_members(),
    "project.add_member": lambda c: c.project.add_member("a@example.com"),
    "project.update_member": lambda c: c.project.update_member("a@example.com", "OWNER"),
    "project.remove_member": lambda c: c.project.remove_member("a@example.com"),
}


VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

def _public(cls: type) -> set[str]:
    return {name for name, member in vars(cls).items() if not name.startswith("_") and callable(member)}


def test_every_public_method_is_accounted_for():
    assert _public(MemoryClient) == set(STATUS) == _public(AsyncMemoryClient)
    assert _public(Project) == set(PROJECT_STATUS) == _public(AsyncProject)
    refused = {n for n, s in STATUS.items() if s == REFUSED} | {f"project.{n}" for n in PROJECT_STATUS}
    assert refused == set(REFUSALS)


@pytest.fixture(scope="module")
def mem0_host(server) -> str:
    """The root a mem0 client is given as ``host``."""
    return server.url.removesuffix("/v1") + "/mem0"


@pytest.fixture(scope="module")
def native(server, make_key):
    """``native(tenant)`` → an httpx client on Engram's own ``/v1`` API with that tenant's key, and the key."""
    clients: list[httpx.Client] = []

    def make(tenant: str) -> tuple[httpx.Client, str]:
        key = make_key(tenant)
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        clients.append(client)
        return client, key

    yield make
    for client in clients:
        client.close()


Call = Callable[..., Awaitable[Any]]


def _sync(client: MemoryClient) -> Call:
    async def call(method: str, *args: Any, **kwargs: Any) -> Any:
        target: Any = client
        for part in method.split("."):
            target = getattr(target, part)
        return target(*args, **kwargs)
    return call


def _async(client: AsyncMemoryClient) -> Call:
    async def call(method: str, *args: Any, **kwargs: Any) -> Any:
        target: Any = client
        for part in method.split("."):
            target = getattr(target, part)
        return await target(*args, **kwargs)
    return call


async def _raises(kind: type[Exception], call: Awaitable[Any]) -> Exception:
    try:
        await call
    except kind as exc:
        return exc
    raise AssertionError(f"{kind.__name__} not raised")


def _texts(results: list[dict]) -> set[str]:
    return {r["memory"] for r in results}


async def _scenario(call: Call, http: httpx.Client, fake) -> None:
    """Every method that works, on one tenant's data (the same for the sync and the async client)."""
    added = await call("add", [{"role": "user", "content": "Alice keeps bees"},
                               {"role": "user", "content": "Alice lives in Lyon"}], user_id="alice", infer=False)
    alice = [r["id"] for r in added["results"]]
    bob = (await call("add", "Bob plays chess", user_id="bob", infer=False))["results"][0]["id"]
    await call("add", "Planner prefers short plans", agent_id="planner", infer=False)
    await call("add", "Run note: booked the hotel", user_id="alice", run_id="trip-9", infer=False)

    # users(): every user, agent and run holding memories, with counts
    users = await call("users")
    by_name = {(e["type"], e["name"]): e for e in users["results"]}
    assert users["count"] == len(users["results"]) == 4 and users["next"] is None
    assert {k: e["total_memories"] for k, e in by_name.items()} == {
        ("user", "alice"): 3, ("user", "bob"): 1, ("agent", "planner"): 1, ("run", "trip-9"): 1}
    assert by_name[("user", "alice")]["id"] == "user:alice" and by_name[("user", "alice")]["created_at"]

    # get / search / get_all / history; a mem0-style UUID is a memory that does not exist here: 404
    assert (await call("get", alice[0]))["memory"] == "Alice keeps bees"
    assert "bees" in (await call("search", "what does alice keep", filters={"user_id": "alice"},
                                 top_k=1))["results"][0]["memory"]
    assert (await call("get_all", filters={"user_id": "alice"}))["count"] == 3
    await _raises(MemoryNotFoundError, call("get", str(uuid.uuid4())))
    await _raises(MemoryNotFoundError, call("update", str(uuid.uuid4()), text="x"))

    # batch_update: all or none
    missing = str(uuid.uuid4())
    await _raises(MemoryNotFoundError, call("batch_update", [{"memory_id": alice[0], "text": "Alice keeps wasps"},
                                                             {"memory_id": missing, "text": "nothing"}]))
    assert (await call("get", alice[0]))["memory"] == "Alice keeps bees"  # nothing was written
    done = await call("batch_update", [{"memory_id": alice[0], "text": "Alice keeps three beehives"},
                                       {"memory_id": alice[1], "metadata": {"city": "Lyon"}}])
    assert done["message"] == "Successfully updated 2 memories"
    assert (await call("get", alice[0]))["memory"] == "Alice keeps three beehives"
    assert (await call("get", alice[1]))["metadata"] == {"city": "Lyon"}
    assert [e["event"] for e in await call("history", alice[0])] == ["ADD", "UPDATE"]

    # update (text), and an update that changes nothing writes nothing
    await call("update", alice[1], text="Alice lives in Lyon, France")
    assert [e["event"] for e in await call("history", alice[1])] == ["ADD", "UPDATE", "UPDATE"]

    # feedback: stored, shown in the memory's history
    answer = await call("feedback", alice[0], feedback="positive", feedback_reason="useful for gifts")
    assert answer == {"id": alice[0], "feedback": "POSITIVE", "feedback_reason": "useful for gifts"}
    trail = await call("history", alice[0])
    assert trail[-1]["event"] == "FEEDBACK"
    assert trail[-1]["details"] == {"feedback": "POSITIVE", "feedback_reason": "useful for gifts"}
    assert (await call("get", alice[0]))["memory"] == "Alice keeps three beehives"  # the memory is unchanged

    # profile (the persona): insufficient data, then generated, then read; unknown users are 404
    assert (await call("get_profile", "bob"))["status"] == "insufficient_data"
    await _raises(MemoryNotFoundError, call("get_profile", "nobody-at-all"))
    response = http.post("/memories", json={"messages": "Prefers decaf coffee", "user_id": "alice", "infer": False,
                                             "memory_type": "preference"})
    assert response.status_code == 200, response.text
    fake.push(text("Preferences:\n- Decaf coffee"))
    job = await call("generate_profile", "alice")
    assert job["status"] == "completed" and job["entity_id"] == "alice"
    assert (await call("get_profile_job", job["status_url"]))["job"]["succeeded"] == 1
    assert (await call("get_profile_job", job["job_id"]))["job"]["status"] == "completed"
    profile = await call("get_profile", "alice")
    assert profile["status"] == "succeeded" and profile["profile"] == "Preferences:\n- Decaf coffee"
    assert profile["generation_count"] == 1 and profile["entity_id"] == "alice"
    assert (await call("get_profile_settings"))["enabled"] is True

    # batch_delete: all or none
    await _raises(MemoryNotFoundError, call("batch_delete", [{"memory_id": bob}, {"memory_id": missing}]))
    assert (await call("get", bob))["memory"] == "Bob plays chess"
    bob2 = (await call("add", "Bob owns a red bike", user_id="bob", infer=False))["results"][0]["id"]
    assert (await call("batch_delete", [{"memory_id": bob}, {"memory_id": bob2}]))["message"] == \
        "Successfully deleted 2 memories"
    await _raises(MemoryNotFoundError, call("get", bob))

    # delete_all(filters=...): mem0 2.2's form purges exactly that scope
    await call("add", "Bob is back", user_id="bob", infer=False)
    await call("delete_all", filters={"user_id": "bob"})
    assert (await call("get_all", filters={"user_id": "bob"}))["count"] == 0
    # alice: her two facts, the run note, the preference and her persona
    assert (await call("get_all", filters={"user_id": "alice"}))["count"] == 5

    # delete(delete_linked=True), delete_users for one user, an app refused, then reset (everything)
    assert (await call("delete", alice[1], delete_linked=True)) == {"message": "Memory deleted successfully!"}
    await call("delete_users", agent_id="planner")
    assert ("agent", "planner") not in {(e["type"], e["name"]) for e in (await call("users"))["results"]}
    error = await _raises(ValidationError, call("delete_users", app_id="shop"))
    assert "no apps" in str(error)
    assert (await call("delete_users", user_id="alice")) == {"message": "Entity deleted successfully."}
    assert (await call("get_all", filters={"user_id": "alice"}))["count"] == 0
    await call("add", "Carol sings", user_id="carol", infer=False)
    assert (await call("reset"))["message"].startswith("Client reset successful")
    assert (await call("users"))["count"] == 0

    # the deliberate refusals: 400s that say what to use instead, and write nothing
    for name, how in REFUSALS.items():
        raised = None
        try:
            result = how(_Awaiting(call))
            await result
        except ValidationError as exc:
            raised = exc
        assert raised is not None and "not supported by Engram" in str(raised), name
    assert (await call("users"))["count"] == 0


class _Awaiting:
    """``client.method(...)`` / ``client.project.method(...)`` → the awaitable of ``call("method", ...)``."""

    def __init__(self, call: Call, prefix: str = "") -> None:
        self._call, self._prefix = call, prefix

    def __getattr__(self, name: str) -> Any:
        if name == "project":
            return _Awaiting(self._call, "project.")
        return lambda *args, **kwargs: self._call(self._prefix + name, *args, **kwargs)


def test_the_sync_client_end_to_end(mem0_host, native, fake):
    http, key = native("mem0-sync")
    client = MemoryClient(api_key=key, host=mem0_host)
    try:
        asyncio.run(_scenario(_sync(client), http, fake))
    finally:
        client.client.close()


def test_the_async_client_end_to_end(mem0_host, native, fake):
    http, key = native("mem0-async")

    async def run() -> None:
        client = AsyncMemoryClient(api_key=key, host=mem0_host)
        async with client:
            await _scenario(_async(client), http, fake)

    asyncio.run(run())


def test_the_other_clients_paths_of_the_core_calls_work_async(mem0_host, native, fake):
    """The async client's own add, search, get_all, update, history and delete_all paths (the scenario already ran
    them; here the answers are compared with the sync client's on the same data)."""
    http, key = native("mem0-both")
    sync = MemoryClient(api_key=key, host=mem0_host)
    sync.add("Dana paints in oils", user_id="dana", infer=False)

    async def run() -> dict:
        async with AsyncMemoryClient(api_key=key, host=mem0_host) as client:
            return await client.get_all(filters={"user_id": "dana"})

    assert asyncio.run(run()) == sync.get_all(filters={"user_id": "dana"})
    sync.client.close()


def test_delete_all_with_a_typo_refuses_and_deletes_nothing(mem0_host, native):
    http, key = native("mem0-typo")
    client = MemoryClient(api_key=key, host=mem0_host)
    client.add("Erin bakes bread", user_id="erin", infer=False)
    typo = httpx.delete(f"{mem0_host}/v1/memories/", params={"user_id": "erin", "agnet_id": "x"},
                        headers={"Authorization": f"Token {key}"})
    assert typo.status_code == 400 and typo.json()["error"]["code"] == "unknown_parameter"
    assert typo.json()["error"]["param"] == "agnet_id"
    bad = httpx.delete(f"{mem0_host}/v1/memories/", params={"filters": "not a dict"},
                       headers={"Authorization": f"Token {key}"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "filters"
    json_form = httpx.delete(f"{mem0_host}/v1/memories/", params={"filters": json.dumps({"user_id": "nobody"})},
                             headers={"Authorization": f"Token {key}"})
    assert json_form.status_code == 200
    assert client.get_all(filters={"user_id": "erin"})["count"] == 1
    client.client.close()


def test_feedback_values_are_checked_by_the_server_too(mem0_host, native):
    http, key = native("mem0-feedback")
    client = MemoryClient(api_key=key, host=mem0_host)
    memory_id = client.add("Finn rows at dawn", user_id="finn", infer=False)["results"][0]["id"]
    wrong = httpx.post(f"{mem0_host}/v1/feedback/", json={"memory_id": memory_id, "feedback": "MEH"},
                       headers={"Authorization": f"Token {key}"})
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "feedback"
    assert [e["event"] for e in client.history(memory_id)] == ["ADD"]
    with pytest.raises(MemoryNotFoundError):
        client.feedback(str(uuid.uuid4()), feedback="NEGATIVE")
    client.client.close()


def test_entities_and_their_deletion_stay_in_the_tenant(mem0_host, native):
    _, key = native("mem0-mine")
    _, other_key = native("mem0-theirs")
    mine, theirs = MemoryClient(api_key=key, host=mem0_host), MemoryClient(api_key=other_key, host=mem0_host)
    mine.add("Gus keeps a diary", user_id="gus", infer=False)
    theirs.add("Gus of the other tenant", user_id="gus", infer=False)
    assert [e["name"] for e in theirs.users()["results"]] == ["gus"]
    theirs.delete_users(user_id="gus")
    assert theirs.users()["count"] == 0
    assert mine.get_all(filters={"user_id": "gus"})["count"] == 1
    theirs.add("Hal of the other tenant", user_id="hal", infer=False)
    theirs.reset()
    assert theirs.users()["count"] == 0
    assert [e["name"] for e in mine.users()["results"]] == ["gus"]
    mine.client.close()
    theirs.client.close()


def test_client_side_only_methods():
    assert inspect.getsource(MemoryClient.chat).count("NotImplementedError") >= 1
    assert STATUS["chat"] == CLIENT_SIDE
