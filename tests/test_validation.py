"""Request validation in OpenAI's terms (chalicelib/validation.py): every error code and its wording, ``param``
paths written with brackets and dots, unknown fields refused on every body model — and every field the official
``openai`` SDK may send accepted, checked against the installed SDK's own parameter types, so an SDK upgrade that
adds a field shows up here instead of as a 400 in a user's code."""

from __future__ import annotations

import importlib
import typing
from typing import Annotated, Any

import pydantic
import pytest
from pydantic import Field

from chalicelib.errors import InvalidRequestError
from chalicelib.validation import CODES, RequestBody, check_storable, param_path, parse_json_object, validate


class _Inner(RequestBody):
    word: Annotated[str, Field(min_length=2)] = "ok"


class _Probe(RequestBody):
    """A model with one field per kind of constraint the API's models use."""

    count: int = Field(default=1, ge=1, le=128)
    ratio: float = Field(default=0.5, ge=0.0, le=2.0)
    name: str = Field(default="x", min_length=1, max_length=8)
    word: Annotated[str, Field(min_length=3)] = "abc"
    tags: list[str] = Field(default=[], max_length=2)
    pair: list[int] = Field(default=[1, 2], min_length=2)
    ids: Annotated[list[str], Field(min_length=1)] = ["a"]
    mode: typing.Literal["auto", "none", "fast"] = "auto"
    flag: bool = False
    inner: list[_Inner] = []


def _error(data: Any, prefix: str | None = None) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as caught:
        validate(_Probe, data, prefix=prefix)
    return caught.value


# (code, body, param, message): the full wording for each code the translation produces.
CASES = [
    ("unknown_parameter", {"top_k": 3}, "top_k", "Unknown parameter: 'top_k'."),
    ("unknown_parameter", {"inner": [{"word": "hi"}, {"frobnicate": 1}]}, "inner[1].frobnicate",
     "Unknown parameter: 'inner[1].frobnicate'."),
    ("integer_above_max_value", {"count": 130}, "count",
     "Invalid 'count': integer above maximum value. Expected a value <= 128, but got 130 instead."),
    ("integer_below_min_value", {"count": 0}, "count",
     "Invalid 'count': integer below minimum value. Expected a value >= 1, but got 0 instead."),
    ("decimal_above_max_value", {"ratio": 3}, "ratio",
     "Invalid 'ratio': decimal above maximum value. Expected a value <= 2, but got 3 instead."),
    ("decimal_below_min_value", {"ratio": -0.5}, "ratio",
     "Invalid 'ratio': decimal below minimum value. Expected a value >= 0, but got -0.5 instead."),
    ("invalid_type", {"count": "5"}, "count",
     "Invalid type for 'count': expected an integer, but got a string instead."),
    ("invalid_type", {"count": 1.5}, "count",
     "Invalid type for 'count': expected an integer, but got a decimal number instead."),
    ("invalid_type", {"flag": None}, "flag", "Invalid type for 'flag': expected a boolean, but got null instead."),
    ("invalid_value", {"mode": "slow"}, "mode",
     "Invalid value: 'slow'. Supported values are: 'auto', 'none', and 'fast'."),
    ("string_above_max_length", {"name": "n" * 9}, "name",
     "Invalid 'name': string too long. Expected a string with maximum length 8, but got a string with length 9 "
     "instead."),
    ("empty_string", {"name": ""}, "name",
     "Invalid 'name': empty string. Expected a string with minimum length 1, but got an empty string instead."),
    ("string_below_min_length", {"word": "ab"}, "word",
     "Invalid 'word': string too short. Expected a string with minimum length 3, but got a string with length 2 "
     "instead."),
    ("array_above_max_length", {"tags": ["a", "b", "c"]}, "tags",
     "Invalid 'tags': array too long. Expected an array with maximum length 2, but got an array with length 3 "
     "instead."),
    ("array_below_min_length", {"pair": [1]}, "pair",
     "Invalid 'pair': array too short. Expected an array with minimum length 2, but got an array with length 1 "
     "instead."),
    ("empty_array", {"ids": []}, "ids",
     "Invalid 'ids': empty array. Expected an array with minimum length 1, but got an empty array instead."),
]


@pytest.mark.parametrize("code, body, param, message", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_each_code_in_openai_words(code, body, param, message):
    error = _error(body)
    assert (error.code, error.param, error.message) == (code, param, message)
    assert error.status == 400 and error.type == "invalid_request_error"


def test_every_code_is_exercised():
    produced = {c[0] for c in CASES} | {"missing_required_parameter", "invalid_json"}
    assert produced == CODES


def test_missing_required_parameter():
    class Needs(RequestBody):
        file_id: str

    with pytest.raises(InvalidRequestError) as caught:
        validate(Needs, {}, prefix="files[2]")
    assert (caught.value.code, caught.value.param) == ("missing_required_parameter", "files[2].file_id")
    assert caught.value.message == "Missing required parameter: 'files[2].file_id'."


def test_invalid_json_and_unstorable_values():
    for body in (b"{", b'{"a": NaN}', b'{"a": Infinity}', b"[" * 100_000, b'{"a":' * 50_000):
        with pytest.raises(InvalidRequestError) as caught:
            parse_json_object(body)
        assert caught.value.code == "invalid_json"
    for body, param in ((b'{"attributes": {"n": 1e400}}', "attributes.n"),
                        (b'{"attributes": {"n": -1e400}}', "attributes.n"),
                        (b'{"input": [{"content": "a\\u0000b"}]}', "input[0].content"),
                        (b'{"tools": [{"parameters": {"x": ["\\ud800"]}}]}', "tools[0].parameters.x[0]"),
                        (b'{"a": ' + b"[" * 40 + b"]" * 40 + b"}", "a" + "[0]" * 32)):
        with pytest.raises(InvalidRequestError) as caught:
            parse_json_object(body)
        assert (caught.value.code, caught.value.param) == ("invalid_value", param), body[:60]
    check_storable({"fine": [1, 2.5, "text", None, True]})


def test_union_errors_name_the_member_the_value_fits():
    class Search(RequestBody):
        query: Annotated[str, Field(max_length=5)] | Annotated[list[str], Field(min_length=1)]
        attributes: dict[str, bool | int | float | str] = {}

    cases = [({"query": 5}, "query", "invalid_type",
              "Invalid type for 'query': expected one of a string or an array, but got an integer instead."),
             ({"query": ["a", 1]}, "query[1]", "invalid_type",
              "Invalid type for 'query[1]': expected a string, but got an integer instead."),
             ({"query": []}, "query", "empty_array", None),
             ({"query": "toolong"}, "query", "string_above_max_length", None),
             # a key that happens to be a union member's name is still the client's key
             ({"query": "q", "attributes": {"str": None}}, "attributes.str", "invalid_type", None)]
    for body, param, code, message in cases:
        with pytest.raises(InvalidRequestError) as caught:
            validate(Search, body)
        assert (caught.value.param, caught.value.code) == (param, code), body
        assert message is None or caught.value.message == message


def test_param_path():
    assert param_path("tools", 0, "type") == "tools[0].type"
    assert param_path("input[4]", "content", 0, "text") == "input[4].content[0].text"
    assert param_path("file_ids", 3) == "file_ids[3]"
    assert param_path(None, "memory", "", "top_k") == "memory.top_k"
    assert param_path() == ""


def test_hand_written_params_use_brackets():
    """The params written by hand (ids, tools, filters, include, chunking) follow the same style."""
    from chalicelib import ids
    from chalicelib.ingest.chunk import resolve_chunking_strategy
    from chalicelib.responses import schemas
    from chalicelib.search.filters import compile_filter

    with pytest.raises(InvalidRequestError) as caught:
        ids.validate_id("abc", ids.FILE, param=param_path("file_ids", 3))
    assert caught.value.message == "Invalid 'file_ids[3]': 'abc'. Expected an ID that begins with 'file'."
    assert (caught.value.param, caught.value.code) == ("file_ids[3]", "invalid_value")
    with pytest.raises(InvalidRequestError) as caught:
        schemas.parse_tools([{"type": "file_search", "vector_store_ids": ["vs_a"]}, {"type": "web_search"}])
    assert (caught.value.param, caught.value.code) == ("tools[1].type", "invalid_value")
    with pytest.raises(InvalidRequestError) as caught:
        compile_filter({"type": "and", "filters": [{"type": "eq", "key": "k", "value": 1},
                                                   {"key": "k", "value": 2}]})
    assert (caught.value.param, caught.value.code) == ("filters.filters[1].type", "missing_required_parameter")
    with pytest.raises(InvalidRequestError) as caught:
        resolve_chunking_strategy({"type": "static", "static": {"max_chunk_size_tokens": 10}},
                                  embedder_max_tokens=512, param="files[2].chunking_strategy")
    assert caught.value.param == "files[2].chunking_strategy.static.max_chunk_size_tokens"


@pytest.mark.parametrize("node, param", [
    ({"type": "eq", "key": "k", "value": 1, "frobnicate": 1}, "filters.frobnicate"),
    ({"type": "or", "filters": [{"type": "eq", "key": "k", "value": 1}], "key": "k"}, "filters.key"),
])
def test_filters_refuse_unknown_fields(node, param):
    from chalicelib.search.filters import compile_filter

    with pytest.raises(InvalidRequestError) as caught:
        compile_filter(node)
    assert (caught.value.param, caught.value.code) == (param, "unknown_parameter")


def test_comparison_without_type_is_refused():
    from chalicelib.search.filters import compile_filter

    with pytest.raises(InvalidRequestError) as caught:
        compile_filter({"key": "k", "value": 1})
    assert (caught.value.param, caught.value.code) == ("filters.type", "missing_required_parameter")


# ---- every field the official SDK sends is accepted ------------------------------------------------------------

# Path parameters the SDK's params types carry but never put in the body.
PATH_PARAMS = {"vector_store_id", "batch_id", "upload_id"}
SDK = "openai.types."
# (our model, "module:TypeName" of the SDK's request type, or of an SDK response model whose items are replayed
# as input). Types missing from the installed SDK are skipped (requirements-dev pins only a lower bound).
PAIRS = [
    ("chalicelib.api.schemas:CreateVectorStore", "vector_store_create_params:VectorStoreCreateParams"),
    ("chalicelib.api.schemas:StoreExpiresAfter", "vector_store_create_params:ExpiresAfter"),
    ("chalicelib.api.schemas:UpdateVectorStore", "vector_store_update_params:VectorStoreUpdateParams"),
    ("chalicelib.api.schemas:StoreExpiresAfter", "vector_store_update_params:ExpiresAfter"),
    ("chalicelib.api.schemas:SearchRequest", "vector_store_search_params:VectorStoreSearchParams"),
    ("chalicelib.search.service:_Ranking", "vector_store_search_params:RankingOptions"),
    ("chalicelib.api.schemas:CreateVectorStoreFile", "vector_stores.file_create_params:FileCreateParams"),
    ("chalicelib.api.schemas:UpdateVectorStoreFile", "vector_stores.file_update_params:FileUpdateParams"),
    ("chalicelib.api.schemas:CreateFileBatch", "vector_stores.file_batch_create_params:FileBatchCreateParams"),
    ("chalicelib.api.schemas:BatchFile", "vector_stores.file_batch_create_params:File"),
    ("chalicelib.ingest.chunk:_AutoChunking", "auto_file_chunking_strategy_param:AutoFileChunkingStrategyParam"),
    ("chalicelib.ingest.chunk:_StaticChunking",
     "static_file_chunking_strategy_object_param:StaticFileChunkingStrategyObjectParam"),
    ("chalicelib.ingest.chunk:_StaticSizes", "static_file_chunking_strategy_param:StaticFileChunkingStrategyParam"),
    ("chalicelib.api.schemas:FileExpiresAfter", "file_create_params:ExpiresAfter"),
    ("chalicelib.api.upload_schemas:CreateUpload", "upload_create_params:UploadCreateParams"),
    ("chalicelib.api.upload_schemas:UploadExpiresAfter", "upload_create_params:ExpiresAfter"),
    ("chalicelib.api.upload_schemas:CompleteUpload", "upload_complete_params:UploadCompleteParams"),
    ("chalicelib.responses.schemas:CreateResponse", "responses.response_create_params:ResponseCreateParamsStreaming"),
    ("chalicelib.responses.schemas:CreateResponse", "responses.response_create_params:ResponseCreateParamsBase"),
    ("chalicelib.responses.schemas:FileSearchTool", "responses.file_search_tool_param:FileSearchToolParam"),
    ("chalicelib.responses.schemas:FileSearchRanking", "responses.file_search_tool_param:RankingOptions"),
    ("chalicelib.responses.schemas:HybridSearch", "responses.file_search_tool_param:RankingOptionsHybridSearch"),
    ("chalicelib.responses.schemas:FunctionTool", "responses.function_tool_param:FunctionToolParam"),
    ("chalicelib.responses.schemas:ToolChoiceFunction", "responses.tool_choice_function_param:ToolChoiceFunctionParam"),
    ("chalicelib.responses.schemas:ToolChoiceFileSearch", "responses.tool_choice_types_param:ToolChoiceTypesParam"),
    ("chalicelib.responses.schemas:TextConfig", "responses.response_text_config_param:ResponseTextConfigParam"),
    ("chalicelib.responses.schemas:TextFormat", "shared_params.response_format_text:ResponseFormatText"),
    ("chalicelib.responses.schemas:JsonObjectFormat",
     "shared_params.response_format_json_object:ResponseFormatJSONObject"),
    ("chalicelib.responses.schemas:JsonSchemaFormat",
     "responses.response_format_text_json_schema_config_param:ResponseFormatTextJSONSchemaConfigParam"),
    ("chalicelib.responses.schemas:MessageItem", "responses.easy_input_message_param:EasyInputMessageParam"),
    ("chalicelib.responses.schemas:MessageItem", "responses.response_input_item_param:Message"),
    ("chalicelib.responses.schemas:MessageItem", "responses.response_output_message_param:ResponseOutputMessageParam"),
    ("chalicelib.responses.schemas:MessageItem", "responses.response_output_message:ResponseOutputMessage"),
    ("chalicelib.responses.schemas:InputText", "responses.response_input_text_param:ResponseInputTextParam"),
    ("chalicelib.responses.schemas:OutputText", "responses.response_output_text_param:ResponseOutputTextParam"),
    ("chalicelib.responses.schemas:OutputText", "responses.response_output_text:ResponseOutputText"),
    ("chalicelib.responses.schemas:Refusal", "responses.response_output_refusal_param:ResponseOutputRefusalParam"),
    ("chalicelib.responses.schemas:FunctionCallItem",
     "responses.response_function_tool_call_param:ResponseFunctionToolCallParam"),
    ("chalicelib.responses.schemas:FunctionCallItem", "responses.response_function_tool_call:ResponseFunctionToolCall"),
    ("chalicelib.responses.schemas:FunctionCallOutputItem", "responses.response_input_item_param:FunctionCallOutput"),
    ("chalicelib.responses.schemas:FileSearchCallItem",
     "responses.response_file_search_tool_call_param:ResponseFileSearchToolCallParam"),
    ("chalicelib.responses.schemas:FileSearchCallItem",
     "responses.response_file_search_tool_call:ResponseFileSearchToolCall"),
    ("chalicelib.responses.schemas:FileSearchResultItem", "responses.response_file_search_tool_call_param:Result"),
]


def _load(spec: str, base: str = "") -> Any:
    module, name = spec.split(":")
    try:
        return getattr(importlib.import_module(base + module), name)
    except (ImportError, AttributeError):
        return None


def _sdk_fields(kind: Any) -> set[str]:
    if isinstance(kind, type) and issubclass(kind, pydantic.BaseModel):  # an SDK response model
        return {field.alias or name for name, field in kind.model_fields.items()}
    return set(kind.__required_keys__ | kind.__optional_keys__)


@pytest.mark.parametrize("ours, theirs", PAIRS, ids=[f"{a.split(':')[1]}-{b.split(':')[1]}" for a, b in PAIRS])
def test_the_sdks_fields_are_accepted(ours, theirs):
    model = _load(ours)
    sdk = _load(theirs, SDK)
    if sdk is None:
        pytest.skip(f"{theirs} is not in the installed openai SDK")
    accepted = {field.alias or name for name, field in model.model_fields.items()}
    missing = _sdk_fields(sdk) - PATH_PARAMS - accepted
    assert not missing, f"{model.__name__} would answer 400 unknown_parameter to the SDK's {sorted(missing)}"
    assert model.model_config.get("extra") == "forbid"


def test_filter_fields_match_the_sdk():
    from chalicelib.search import filters

    comparison = _load("shared_params.comparison_filter:ComparisonFilter", SDK)
    compound = _load("shared_params.compound_filter:CompoundFilter", SDK)
    if comparison is None or compound is None:
        pytest.skip("the installed openai SDK has no shared filter types")
    assert _sdk_fields(comparison) == filters._COMPARISON_FIELDS
    assert _sdk_fields(compound) == filters._COMPOUND_FIELDS


def test_every_request_body_model_refuses_unknown_fields():
    """Every model a route validates a JSON body with derives from RequestBody (the mem0 adapter, lenient by
    design, aside; and Engram's own memory_search_call item sent back, which is accepted whatever it holds and
    dropped unread)."""
    from chalicelib.api import memory_schemas, schemas, upload_schemas
    from chalicelib.api.routes import agents
    from chalicelib.responses import schemas as response_schemas

    models = [value for module in (schemas, upload_schemas, memory_schemas, response_schemas, agents)
              for value in vars(module).values()
              if isinstance(value, type) and issubclass(value, pydantic.BaseModel) and value.__module__ == module.__name__]
    assert len(models) > 30
    dropped_unread = {response_schemas.MemorySearchCallItem}
    for model in (m for m in models if m not in dropped_unread):
        assert issubclass(model, RequestBody) and model.model_config.get("extra") == "forbid", model
