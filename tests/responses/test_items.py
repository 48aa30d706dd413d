"""Items → chat messages (Chat Completions ordering rules) and the unanswered-call check."""

from __future__ import annotations

import pytest

from chalicelib.chat.base import ChatMessage
from chalicelib.errors import InvalidRequestError
from chalicelib.responses import items, schemas


def test_string_input_is_one_user_message_with_an_id():
    (item,) = items.input_items(schemas.parse_input("hello"))
    assert item["id"].startswith("msg_") and item["role"] == "user"
    assert item["content"] == [{"type": "input_text", "text": "hello"}]
    assert items.to_messages([item]) == [ChatMessage("user", "hello")]


def test_calls_of_one_turn_form_one_assistant_message_answered_in_order():
    search = items.file_search_call(["q"], status="completed",
                                    results=[{"file_id": "file-1", "filename": "a.txt", "score": 0.5, "text": "T",
                                              "attributes": {}}])
    turn = [items.message("Let me look."), search, items.function_call("call_9", "lookup", '{"x": 1}')]
    answer = {"id": "fco_1", "type": "function_call_output", "call_id": "call_9", "output": "42"}
    messages = items.to_messages([*turn, answer, {"type": "message", "role": "developer",
                                                  "content": [{"type": "input_text", "text": "be brief"}]}])
    assert [m.role for m in messages] == ["assistant", "tool", "tool", "system"]
    assert messages[0].content == "Let me look."
    assert [c.name for c in messages[0].tool_calls] == ["file_search", "lookup"]
    assert messages[1].tool_call_id == search["id"] and "<|file-1|>" in messages[1].content
    assert messages[2] == ChatMessage("tool", "42", tool_call_id="call_9")
    items.check_tool_outputs(messages)


def test_unanswered_function_call_and_orphan_output_are_400():
    call = items.function_call("call_1", "f", "{}")
    with pytest.raises(InvalidRequestError, match="No tool output found for function call call_1"):
        items.check_tool_outputs(items.to_messages([call, *items.input_items(schemas.parse_input("hi"))]))
    orphan = {"type": "function_call_output", "call_id": "call_7", "output": "x"}
    with pytest.raises(InvalidRequestError, match="call_id call_7"):
        items.check_tool_outputs(items.to_messages([orphan]))


@pytest.mark.parametrize("value, param, code", [
    ([], "input", "empty_array"),
    ([{"type": "input_image", "image_url": "x"}], "input[0].type", "invalid_value"),
    ([{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}], "input[0].content[0].type",
     "invalid_value"),
    ([{"role": "user", "content": [{"type": "input_text"}]}], "input[0].content[0].text",
     "missing_required_parameter"),
    ([{"role": "user", "content": "ok"}, {"type": "function_call_output", "output": "x"}], "input[1].call_id",
     "missing_required_parameter"),
    ([{"role": "robot", "content": "x"}], "input[0].role", "invalid_value"),
    ([{"role": "user", "content": 5}], "input[0].content", "invalid_type"),
    ([{"role": "user", "content": "x"}, {"role": "user", "content": "y", "frobnicate": 1}], "input[1].frobnicate",
     "unknown_parameter"),
    ([{"role": "user", "content": [{"type": "input_text", "text": "t"}, {"type": "input_text", "text": 7}]}],
     "input[0].content[1].text", "invalid_type"),
])
def test_invalid_items_name_the_field(value, param, code):
    with pytest.raises(InvalidRequestError) as caught:
        schemas.parse_input(value)
    assert (caught.value.param, caught.value.code) == (param, code)
    assert f"'{param}'" in caught.value.message or "Invalid value" in caught.value.message
