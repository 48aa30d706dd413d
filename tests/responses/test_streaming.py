"""Streaming (``stream: true``) through the Chalice route: exact event names, fields and order, sequence numbers,
deltas that add up to the final text, and streamed results equal to the non-streamed ones field for field."""

from __future__ import annotations

import re

import pytest

from tests.fakes.chat_server import call, text, tool_calls

DOC = b"Zephyr protocol: the relay tower on Kestrel Hill transmits every ninety seconds."


@pytest.fixture(scope="module")
def setup(client):
    f = client.files.create(file=("zephyr.txt", DOC), purpose="assistants")
    store = client.vector_stores.create(name="zephyr", file_ids=[f.id])
    return {"file": f.id, "store": store.id}


def _script(fake, file_id: str) -> None:
    fake.push(tool_calls(call("file_search", {"queries": ["relay tower interval"]})),
              text(f"The tower transmits every ninety seconds <|{file_id}|>. Anything else?",
                   chunks=["The tower transmits every", " ninety seconds <|fi", f"{file_id[2:]}|>", ". Anything",
                           " else?"]))


def _body(setup) -> dict:
    return {"model": "fake-model", "input": "How often does the relay tower transmit?",
            "tools": [{"type": "file_search", "vector_store_ids": [setup["store"]]}],
            "include": ["file_search_call.results"], "metadata": {"case": "stream"}}


def test_event_order_and_fields(client, fake, setup):
    _script(fake, setup["file"])
    events = list(client.responses.create(**_body(setup), stream=True))
    kinds = [e.type for e in events]
    deltas = [i for i, k in enumerate(kinds) if k == "response.output_text.delta"]
    assert kinds[:7] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.file_search_call.in_progress", "response.file_search_call.searching",
                         "response.file_search_call.completed", "response.output_item.done"]
    assert kinds[7:9] == ["response.output_item.added", "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert set(kinds[deltas[0]:deltas[-1] + 1]) == {"response.output_text.delta",
                                                    "response.output_text.annotation.added"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    created, final = events[0].response, events[-1].response
    assert created.status == "in_progress" and created.output == [] and created.id == final.id
    search_added = events[2]
    assert search_added.output_index == 0 and search_added.item.status == "in_progress"
    assert all(e.item_id == search_added.item.id and e.output_index == 0 for e in events[3:6])
    message = final.output[1]
    text_deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text_deltas == message.content[0].text == "The tower transmits every ninety seconds. Anything else?"
    (annotation_event,) = [e for e in events if e.type == "response.output_text.annotation.added"]
    assert annotation_event.annotation.model_dump() == message.content[0].annotations[0].model_dump()
    assert annotation_event.annotation_index == 0 and annotation_event.output_index == 1
    assert annotation_event.item_id == message.id
    done = events[-4]
    assert done.text == text_deltas and done.item_id == message.id and done.content_index == 0


def _normalized(value):
    """The response with generated ids and timestamps replaced by stable placeholders (in order of appearance)."""
    names: dict[str, str] = {}
    dumped = value.model_dump_json()
    for found in re.findall(r'"(?:resp|msg|fs|fc)_[0-9A-Za-z]+"', dumped):
        names.setdefault(found, f'"id{len(names)}"')
    for original, placeholder in names.items():
        dumped = dumped.replace(original, placeholder)
    return re.sub(r'"(created_at|completed_at)":[0-9.]+', r'"\1":0', dumped)


def test_streamed_result_equals_the_non_streamed_one(client, fake, setup):
    _script(fake, setup["file"])
    plain = client.responses.create(**_body(setup))
    _script(fake, setup["file"])
    streamed = list(client.responses.create(**_body(setup), stream=True))[-1].response
    assert streamed.model_dump() == client.responses.retrieve(
        streamed.id, include=["file_search_call.results"]).model_dump()  # the same run, exactly
    assert _normalized(streamed) == _normalized(plain)  # two runs: equal but for ids and times
    assert fake.requests[0] == fake.requests[2]  # the model was asked the same


def test_sdk_stream_helper_accumulates_the_same_response(client, fake, setup):
    _script(fake, setup["file"])
    body = _body(setup)
    with client.responses.stream(model=body["model"], input=body["input"], tools=body["tools"],
                                 include=body["include"]) as stream:
        seen = [event.type for event in stream]
        final = stream.get_final_response()
    assert seen[-1] == "response.completed"
    stored = client.responses.retrieve(final.id, include=["file_search_call.results"])
    assert final.output_text == stored.output_text and final.output[1].content[0].annotations[0].file_id \
        == setup["file"]
