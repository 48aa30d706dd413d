"""Cursor pagination through the SDK's auto-iteration (OPENAI-COMPAT.md §0 "Cursor lists", §7 gotcha 2): every
object exactly once, in order, across pages; ``has_more`` / ``first_id`` / ``last_id``; ``after`` / ``before``."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

N = 105


def _create_many(create: Callable[[int], str]) -> list[str]:
    """``create(i)`` for i < N, eight at a time (the API is threaded); the ids in creation order, which is id order
    (ids embed their creation time, and lists page by id)."""
    with ThreadPoolExecutor(max_workers=8) as pool:
        return sorted(pool.map(create, range(N)))


@pytest.fixture(scope="module")
def pager(make_client) -> openai.OpenAI:
    return make_client("pager")


@pytest.fixture(scope="module")
def store_ids(pager) -> list[str]:
    """105 vector stores of tenant ``pager``, in creation order."""
    return _create_many(lambda i: pager.vector_stores.create(name=f"store-{i:03d}").id)


@pytest.fixture(scope="module")
def file_client(make_client) -> openai.OpenAI:
    return make_client("pager-files")


@pytest.fixture(scope="module")
def file_ids(file_client) -> list[str]:
    """105 small files of tenant ``pager-files``, in creation order."""
    return _create_many(lambda i: file_client.files.create(file=(f"f{i:03d}.txt", f"file number {i}".encode()),
                                                           purpose="assistants").id)


def _extra(page, name: str):
    return (page.model_extra or {}).get(name, getattr(page, name, None))


# ---- vector stores ----------------------------------------------------------------------------------------------


def test_auto_pagination_walks_every_store_once_desc(pager, store_ids):
    seen = [s.id for s in pager.vector_stores.list()]
    assert seen == list(reversed(store_ids))


def test_auto_pagination_asc(pager, store_ids):
    assert [s.id for s in pager.vector_stores.list(order="asc")] == store_ids


def test_limit_100_pages(pager, store_ids):
    first = pager.vector_stores.list(limit=100)
    assert len(first.data) == 100 and first.has_more is True
    second = first.get_next_page()
    assert len(second.data) == 5 and second.has_more is False
    assert [s.id for s in first.data + second.data] == list(reversed(store_ids))
    assert [s.id for s in pager.vector_stores.list(limit=100, order="asc")] == store_ids


def test_raw_page_fields(pager, store_ids):
    page = pager.vector_stores.list(limit=10)
    assert _extra(page, "object") == "list"
    assert len(page.data) == 10 and page.has_more is True
    assert _extra(page, "first_id") == page.data[0].id == store_ids[-1]
    assert _extra(page, "last_id") == page.data[-1].id == store_ids[-10]
    last = pager.vector_stores.list(limit=10, order="asc", after=store_ids[-4])
    assert [s.id for s in last.data] == store_ids[-3:]
    assert last.has_more is False
    assert _extra(last, "first_id") == store_ids[-3] and _extra(last, "last_id") == store_ids[-1]


def test_after_and_before(pager, store_ids):
    desc = list(reversed(store_ids))
    middle = pager.vector_stores.list(limit=10, after=desc[9])
    assert [s.id for s in middle.data] == desc[10:20] and middle.has_more is True
    back = pager.vector_stores.list(limit=10, before=desc[10])
    assert [s.id for s in back.data] == desc[0:10]
    back_partial = pager.vector_stores.list(limit=10, before=desc[3])
    assert [s.id for s in back_partial.data] == desc[0:3]
    asc_back = pager.vector_stores.list(limit=5, order="asc", before=store_ids[50])
    assert [s.id for s in asc_back.data] == store_ids[45:50]
    window = pager.vector_stores.list(limit=100, after=desc[4], before=desc[8])
    assert [s.id for s in window.data] == desc[5:8]


def test_after_a_deleted_id_continues(make_client):
    client = make_client("pager-delete")
    ids = [client.vector_stores.create(name=f"d{i}").id for i in range(30)]
    desc = list(reversed(ids))
    client.vector_stores.delete(desc[9])
    page = client.vector_stores.list(limit=10, after=desc[9])
    assert [s.id for s in page.data] == desc[10:20]
    # Deleting while iterating neither repeats nor skips the remaining stores.
    seen = []
    for store in client.vector_stores.list(limit=7):
        seen.append(store.id)
        if store.id == desc[14]:
            client.vector_stores.delete(desc[13])  # already seen
            client.vector_stores.delete(desc[15])  # not yet seen
    expected = [i for i in desc if i not in (desc[9], desc[15])]
    assert seen == expected


def test_empty_list(make_client):
    page = make_client("pager-empty").vector_stores.list()
    assert page.data == [] and page.has_more is False
    assert list(make_client("pager-empty").vector_stores.list()) == []


@pytest.mark.parametrize("limit", [0, 101, -1])
def test_limit_out_of_range_is_400(pager, limit):
    with pytest.raises(openai.BadRequestError) as exc:
        pager.vector_stores.list(limit=limit)
    assert exc.value.param == "limit"


def test_limit_not_an_integer_is_400(pager):
    with pytest.raises(openai.BadRequestError) as exc:
        pager.vector_stores.list(extra_query={"limit": "ten"})
    assert exc.value.param == "limit"


def test_bad_order_is_400(pager):
    with pytest.raises(openai.BadRequestError) as exc:
        pager.vector_stores.list(order="sideways")  # type: ignore[arg-type]
    assert exc.value.param == "order"


def test_bad_cursor_is_400(pager):
    with pytest.raises(openai.BadRequestError) as exc:
        pager.vector_stores.list(after="not an id!")
    assert exc.value.param == "after"


def test_a_cursor_naming_no_place_in_its_list_is_400_on_every_list(make_client, server, make_key):
    """Every list route alike: a cursor that is not an id of the list's kind (``vs_garbage``, another kind's id),
    or (lists ordered by position) an item never in the list, is a 400 naming ``after`` / ``before`` — before, such a
    cursor gave an empty page, the first page or the tenant's store depending on the route."""
    import httpx

    client = make_client("pager-cursors")
    store = client.vector_stores.create(name="cursors")
    file = client.files.create(file=("a.txt", b"cursor test"), purpose="assistants")
    client.vector_stores.files.create(vector_store_id=store.id, file_id=file.id)
    batch = client.vector_stores.file_batches.create(vector_store_id=store.id, file_ids=[file.id])
    conversation = client.conversations.create(items=[{"type": "message", "role": "user", "content": "hi"}])
    headers = {"Authorization": f"Bearer {make_key('pager-cursors')}"}
    lists = {"/files": "file-", "/vector_stores": "vs_", f"/vector_stores/{store.id}/files": "file-",
             f"/vector_stores/{store.id}/file_batches/{batch.id}/files": "file-", "/conversations": "conv_",
             "/agents": "agent_", "/memories?user_id=u": "mem_"}
    well_formed_unknown = "0" * 10 + "A" * 14
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
        for path, prefix in lists.items():
            join = "&" if "?" in path else "?"
            for cursor in (prefix + "garbage", "vs_" + well_formed_unknown if prefix != "vs_" else
                           "file-" + well_formed_unknown, "not an id!"):
                response = http.get(f"{path}{join}after={cursor}")
                assert response.status_code == 400, (path, cursor, response.text)
                assert response.json()["error"]["param"] == "after"
            # A well-formed id of the list's kind is a place in it, whether or not it still exists.
            assert http.get(f"{path}{join}after={prefix}{well_formed_unknown}").status_code == 200, path
        for path in (f"/conversations/{conversation.id}/items", f"/responses/resp_{well_formed_unknown}/input_items"):
            response = http.get(f"{path}?after=msg_{well_formed_unknown}")
            assert response.status_code == (400 if "conversations" in path else 404), (path, response.text)
        item = client.conversations.items.list(conversation.id).data[0]
        assert http.get(f"/conversations/{conversation.id}/items?after={item.id}").status_code == 200
        client.conversations.items.delete(item.id, conversation_id=conversation.id)
        # a deleted item keeps its place
        assert http.get(f"/conversations/{conversation.id}/items?after={item.id}").status_code == 200


# ---- files -------------------------------------------------------------------------------------------------------


def test_files_auto_pagination(file_client, file_ids):
    assert [f.id for f in file_client.files.list()] == list(reversed(file_ids))
    assert [f.id for f in file_client.files.list(order="asc")] == file_ids


def test_files_auto_pagination_limit_7(file_client, file_ids):
    first = file_client.files.list(limit=7)
    assert len(first.data) == 7 and first.has_more is True
    assert _extra(first, "first_id") == file_ids[-1] and _extra(first, "last_id") == file_ids[-7]
    assert [f.id for f in file_client.files.list(limit=7)] == list(reversed(file_ids))
    assert [f.id for f in file_client.files.list(limit=7, order="asc")] == file_ids
    assert [f.id for f in file_client.files.list(limit=7, purpose="assistants")] == list(reversed(file_ids))
    assert list(file_client.files.list(limit=7, purpose="batch")) == []


@pytest.mark.parametrize("limit", [0, 10_001])
def test_files_limit_out_of_range_is_400(file_client, limit):
    with pytest.raises(openai.BadRequestError) as exc:
        file_client.files.list(limit=limit)
    assert exc.value.param == "limit"


def test_files_bad_order_and_purpose_are_400(file_client):
    with pytest.raises(openai.BadRequestError) as exc:
        file_client.files.list(order="sideways")  # type: ignore[arg-type]
    assert exc.value.param == "order"
    with pytest.raises(openai.BadRequestError) as exc:
        file_client.files.list(purpose="nonsense")
    assert exc.value.param == "purpose"


# ---- vector store files -----------------------------------------------------------------------------------------


def test_vector_store_files_auto_pagination(file_client, file_ids):
    store = file_client.vector_stores.create(name="many-files")
    batch = file_client.vector_stores.file_batches.create(store.id, file_ids=file_ids)
    assert batch.file_counts.total == N
    if batch.file_counts.in_progress:
        batch = file_client.vector_stores.file_batches.poll(batch.id, vector_store_id=store.id)
    assert batch.file_counts.completed == N
    assert file_client.vector_stores.retrieve(store.id).file_counts.completed == N

    seen = [f.id for f in file_client.vector_stores.files.list(vector_store_id=store.id, limit=20)]
    assert seen == list(reversed(file_ids))
    seen = [f.id for f in file_client.vector_stores.files.list(vector_store_id=store.id, limit=20, order="asc")]
    assert seen == file_ids
    assert [f.id for f in file_client.vector_stores.files.list(vector_store_id=store.id)] == list(reversed(file_ids))
    page = file_client.vector_stores.files.list(vector_store_id=store.id, limit=100)
    assert len(page.data) == 100 and page.has_more is True
    assert _extra(page, "last_id") == page.data[-1].id
    filtered = list(file_client.vector_stores.files.list(vector_store_id=store.id, limit=20, filter="completed"))
    assert len(filtered) == N
    assert list(file_client.vector_stores.files.list(vector_store_id=store.id, limit=20, filter="failed")) == []
    batch_files = [f.id for f in file_client.vector_stores.file_batches.list_files(
        batch.id, vector_store_id=store.id, limit=20)]
    assert batch_files == list(reversed(file_ids))

    with pytest.raises(openai.BadRequestError) as exc:
        file_client.vector_stores.files.list(vector_store_id=store.id, limit=101)
    assert exc.value.param == "limit"
    with pytest.raises(openai.BadRequestError) as exc:
        file_client.vector_stores.files.list(vector_store_id=store.id, filter="done")  # type: ignore[arg-type]
    assert exc.value.param == "filter"
