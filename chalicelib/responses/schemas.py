"""``POST /v1/responses`` request bodies as pydantic models (OPENAI-COMPAT.md §4; SDK ``response_create_params``).

Unknown fields are ignored, types are strict. Input items are validated one by one (:func:`parse_input`) so
errors name the item (``input.2.content.0.text``). What Engram does not implement is refused with a 400 naming the
field rather than silently ignored: ``background``, ``prompt``, non-text ``text.format``, tools other than
``file_search`` and ``function``, image/file input parts. ``conversation`` is checked by
:func:`chalicelib.responses.conversations.requested`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from chalicelib.errors import InvalidRequestError
from chalicelib.validation import validate
from chalicelib.wire import Metadata

# OpenAI: file_search max_num_results is 1..50, echoed as 20 when unset (SPEC example).
DEFAULT_MAX_NUM_RESULTS = 20
MAX_VECTOR_STORES = 16
MAX_TOOLS = 128  # OpenAI's limit on function tools per request
MAX_INPUT_ITEMS = 2048
FILE_SEARCH_RESULTS = "file_search_call.results"
MEMORY_SEARCH_RESULTS = "memory_search_call.results"  # Engram's memory_search_call item
# The SDK's ResponseIncludable values (accepted; only the two *_call.results change anything here) and Engram's.
INCLUDABLE = frozenset({
    FILE_SEARCH_RESULTS, MEMORY_SEARCH_RESULTS, "web_search_call.results", "web_search_call.action.sources",
    "message.input_image.image_url",
    "computer_call_output.output.image_url", "code_interpreter_call.outputs", "reasoning.encrypted_content",
    "message.output_text.logprobs"})
FUNCTION_NAME = r"^[a-zA-Z0-9_-]{1,64}$"
MAX_MEMORY_TOP_K = 50
# Item ids a client may give: OpenAI's charset ("letters, numbers, underscores, or dashes"), Engram's length cap.
ITEM_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")  # whole string: ITEM_ID.fullmatch


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, defer_build=True)


class HybridSearch(_Body):
    """``ranking_options.hybrid_search``: both weights required when present."""

    embedding_weight: float = Field(ge=0)
    text_weight: float = Field(ge=0)


class FileSearchRanking(_Body):
    """``file_search.ranking_options``: no ``none`` ranker here, unlike ``/search`` (OPENAI-COMPAT.md §4)."""

    ranker: Literal["auto", "default-2024-11-15"] = "auto"
    score_threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    hybrid_search: HybridSearch | None = None


class FileSearchTool(_Body):
    """``{"type": "file_search", "vector_store_ids": [...], "max_num_results", "filters", "ranking_options"}``."""

    type: Literal["file_search"]
    vector_store_ids: list[Annotated[str, Field(max_length=128)]] = Field(min_length=1, max_length=MAX_VECTOR_STORES)
    max_num_results: int = Field(default=DEFAULT_MAX_NUM_RESULTS, ge=1, le=50)
    filters: dict[str, Any] | None = None
    ranking_options: FileSearchRanking | None = None

    def echo(self) -> dict[str, Any]:
        """The tool as the Response object echoes it, defaults filled in."""
        ranking = self.ranking_options or FileSearchRanking()
        return {"type": "file_search", "vector_store_ids": list(self.vector_store_ids),
                "max_num_results": self.max_num_results, "filters": self.filters,
                "ranking_options": ranking.model_dump(exclude_none=True)}


class FunctionTool(_Body):
    """``{"type": "function", "name", "description", "parameters", "strict"}`` — executed by the client."""

    type: Literal["function"]
    name: str = Field(pattern=FUNCTION_NAME)
    description: str | None = Field(default=None, max_length=4096)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    def echo(self) -> dict[str, Any]:
        """The tool as echoed (``strict`` defaults to true, as OpenAI's Responses API does)."""
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.parameters if self.parameters is not None else {"type": "object", "properties": {}},
                "strict": True if self.strict is None else self.strict}


Tool = FileSearchTool | FunctionTool


class ToolChoiceFunction(_Body):
    """``{"type": "function", "name": ...}``: force that function on the first model call."""

    type: Literal["function"]
    name: str = Field(pattern=FUNCTION_NAME)


class ToolChoiceFileSearch(_Body):
    """``{"type": "file_search"}``: force a search on the first model call."""

    type: Literal["file_search"]


ToolChoiceOption = Literal["auto", "none", "required"]
ToolChoice = ToolChoiceOption | ToolChoiceFunction | ToolChoiceFileSearch


class TextFormat(_Body):
    """``text.format``: only plain text is produced."""

    type: Literal["text"]


class TextConfig(_Body):
    """``text``: ``{"format": {"type": "text"}}`` (``verbosity`` accepted and ignored)."""

    format: TextFormat = TextFormat(type="text")


class CreateResponse(_Body):
    """``POST /v1/responses``. ``input`` items are checked by :func:`parse_input`; ``store`` defaults to true,
    ``parallel_tool_calls`` to true, ``tool_choice`` to ``auto``."""

    model: str = Field(min_length=1, max_length=256)
    input: str | list[dict[str, Any]]  # items checked by parse_input
    instructions: str | None = None
    previous_response_id: str | None = Field(default=None, max_length=128)
    store: bool | None = None
    stream: bool | None = None
    background: bool | None = None
    metadata: Metadata | None = None
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=MAX_TOOLS)  # see parse_tools
    tool_choice: str | dict[str, Any] | None = None  # see parse_tool_choice
    max_tool_calls: int | None = Field(default=None, ge=1)
    parallel_tool_calls: bool | None = None
    include: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    max_output_tokens: int | None = Field(default=None, ge=16)
    text: TextConfig | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = Field(default=None, max_length=512)
    conversation: Any = None  # "conv_..." or {"id": "conv_..."}: see conversations.requested
    prompt: Any = None
    # Engram extensions (extra_body): memory around the response, and an agent profile's defaults.
    memory: dict[str, Any] | bool | None = None  # checked as MemoryOptions by chalicelib.responses.memory
    agent: str | None = Field(default=None, max_length=128)


class MemoryOptions(BaseModel):
    """Engram's ``memory`` extension (a request's ``extra_body``, an agent profile's or a tenant's defaults): the
    scope (``user_id`` defaults to the request's ``user``; ``agent_id`` to the agent profile's id), whether to
    ``recall`` before the model answers and ``remember`` after, how many memories (``top_k``) scoring at least
    ``score_threshold``, whether earlier ``exchanges`` are recalled too (those with a cosine similarity of at least
    ``exchange_threshold``), and whether long histories are ``summarization``-condensed. Unset fields fall
    through to the next layer (request → agent → tenant → defaults: recall and remember on, 5 memories,
    threshold 0.3, exchanges on with seed 004's 0.65, summarization on)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    user_id: str | None = Field(default=None, min_length=1, max_length=128)
    agent_id: str | None = Field(default=None, min_length=1, max_length=128)
    run_id: str | None = Field(default=None, min_length=1, max_length=128)
    recall: bool | None = None
    remember: bool | None = None
    top_k: int | None = Field(default=None, ge=1, le=MAX_MEMORY_TOP_K)
    score_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    exchanges: bool | None = None
    exchange_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    summarization: bool | None = None


# ---- input items ----

def check_item_id(value: str) -> str:
    """``value`` if it is a valid item id (:data:`ITEM_ID`).

    Raises:
        ValueError: anything else (pydantic turns it into a 400 naming the field).
    """
    if not ITEM_ID.fullmatch(value):
        raise ValueError("expected an ID of 1 to 128 letters, numbers, underscores, or dashes")
    return value


ItemId = Annotated[str, AfterValidator(check_item_id)]


class InputText(_Body):
    """``{"type": "input_text", "text"}``."""

    type: Literal["input_text"]
    text: str


class OutputText(_Body):
    """``{"type": "output_text", "text", "annotations"}`` (an assistant message replayed as input)."""

    type: Literal["output_text"]
    text: str
    annotations: list[dict[str, Any]] = []


class Refusal(_Body):
    """``{"type": "refusal", "refusal"}``."""

    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[InputText | OutputText | Refusal, Field(discriminator="type")]


class MessageItem(_Body):
    """A message: ``{"type": "message"?, "role", "content": str | parts}`` (``type`` may be omitted)."""

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[ContentPart]
    id: ItemId | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts_only(cls, value: Any) -> Any:
        # Checked here so errors name the part (pydantic would report the union's first member, "a string").
        if isinstance(value, list):
            for index, part in enumerate(value):
                kind = part.get("type") if isinstance(part, dict) else None
                field = _PART_TEXT_FIELD.get(kind) if isinstance(kind, str) else None
                if field is None:
                    raise ValueError(f"part {index} has type {str(kind)[:40]!r}; only text parts (input_text, "
                                     "output_text, refusal) are supported")
                if not isinstance(part.get(field), str):
                    raise ValueError(f"part {index} ({kind}) needs a string '{field}'")
        elif not isinstance(value, str):
            raise ValueError("expected a string or a list of content parts")
        return value


_PART_TEXT_FIELD = {"input_text": "text", "output_text": "text", "refusal": "refusal"}


class FunctionCallItem(_Body):
    """A function call replayed as input: ``{"type": "function_call", "call_id", "name", "arguments"}``."""

    type: Literal["function_call"]
    call_id: str = Field(min_length=1, max_length=128)
    name: str = Field(pattern=FUNCTION_NAME)
    arguments: str
    id: ItemId | None = None


class FunctionCallOutputItem(_Body):
    """The client's result of a function call: ``{"type": "function_call_output", "call_id", "output"}``."""

    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1, max_length=128)
    output: str | list[InputText]
    id: ItemId | None = None


class FileSearchResultItem(_Body):
    """One entry of a replayed ``file_search_call.results``."""

    model_config = ConfigDict(extra="ignore", strict=False, defer_build=True)

    file_id: str | None = None
    filename: str | None = None
    score: float | None = None
    text: str | None = None
    attributes: dict[str, Any] | None = None


class FileSearchCallItem(_Body):
    """A ``file_search_call`` replayed as input (e.g. a previous output sent back verbatim)."""

    type: Literal["file_search_call"]
    id: ItemId
    queries: list[str]
    status: str = "completed"
    results: list[FileSearchResultItem] | None = None


InputItem = MessageItem | FunctionCallItem | FunctionCallOutputItem | FileSearchCallItem
_ITEM_MODELS: dict[str, type[BaseModel]] = {
    "message": MessageItem, "function_call": FunctionCallItem, "function_call_output": FunctionCallOutputItem,
    "file_search_call": FileSearchCallItem}


_TOOL_MODELS: dict[str, type[BaseModel]] = {"file_search": FileSearchTool, "function": FunctionTool}
_CHOICE_MODELS: dict[str, type[BaseModel]] = {"file_search": ToolChoiceFileSearch, "function": ToolChoiceFunction}
TOOL_CHOICE_OPTIONS: tuple[ToolChoiceOption, ...] = ("auto", "none", "required")


def parse_tools(value: list[dict[str, Any]] | None) -> list[Tool]:
    """The request's ``tools``, typed.

    Raises:
        InvalidRequestError: a tool type other than ``file_search``/``function`` (``param`` ``tools.<i>.type``) or
            an invalid tool (``param`` e.g. ``tools.0.max_num_results``).
    """
    return [_one_of(_TOOL_MODELS, raw, f"tools.{index}", "tools") for index, raw in enumerate(value or [])]


def parse_tool_choice(value: str | dict[str, Any] | None) -> ToolChoice | None:
    """The request's ``tool_choice``: ``auto | none | required``, ``{"type": "function", "name"}`` or
    ``{"type": "file_search"}``.

    Raises:
        InvalidRequestError: anything else (``param`` ``tool_choice`` or a field of it).
    """
    if value is None or isinstance(value, dict):
        return None if value is None else _one_of(_CHOICE_MODELS, value, "tool_choice", "tool choices")
    if value in TOOL_CHOICE_OPTIONS:
        return value
    raise InvalidRequestError(f"Invalid 'tool_choice': expected one of {', '.join(TOOL_CHOICE_OPTIONS)} or an "
                              "object.", param="tool_choice", code="invalid_value")


def _one_of(models: dict[str, type[BaseModel]], raw: Any, path: str, what: str) -> Any:
    kind = raw.get("type", "message") if isinstance(raw, dict) else None
    model = models.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise InvalidRequestError(f"Invalid '{path}.type': {str(kind)[:40]!r} is not supported here; supported "
                                  f"{what}: {', '.join(models)}.", param=f"{path}.type", code="invalid_value")
    try:
        return validate(model, raw)
    except InvalidRequestError as exc:
        param = path + (f".{exc.param}" if exc.param else "")
        message = exc.message.replace(f"'{exc.param}'", f"'{param}'") if exc.param else exc.message
        raise InvalidRequestError(message, param=param, code=exc.code) from None


def parse_input(value: str | list[dict[str, Any]], *, param: str = "input",
                max_items: int = MAX_INPUT_ITEMS) -> list[InputItem]:
    """The request's ``input`` (or another list of input items, named ``param``, e.g. a conversation's ``items``)
    as typed items: a string is one user message.

    Raises:
        InvalidRequestError: an empty list, more than ``max_items`` items, an item of an unsupported type, or an
            invalid item (``param`` is the item's path, e.g. ``input.1.call_id``).
    """
    if isinstance(value, str):
        return [MessageItem(role="user", content=value)]
    if not value:
        raise InvalidRequestError(f"Invalid '{param}': expected at least one item.", param=param, code="empty_array")
    if len(value) > max_items:
        raise InvalidRequestError(f"Invalid '{param}': array too long. Expected an array with maximum length "
                                  f"{max_items}, but got an array with length {len(value)} instead.", param=param,
                                  code="array_above_max_length")
    return [_one_of(_ITEM_MODELS, raw, f"{param}.{index}", "input items") for index, raw in enumerate(value)]


def include_results(include: list[str] | None) -> bool:
    """Whether ``include`` (a request's or a query's values) asks for ``file_search_call.results``.

    Raises:
        InvalidRequestError: (400, ``include.<i>``) a value that is not one of :data:`INCLUDABLE`.
    """
    for i, value in enumerate(include or []):
        if value not in INCLUDABLE:
            raise InvalidRequestError(f"Invalid 'include.{i}': {value[:80]!r} is not a supported value.",
                                      param=f"include.{i}", code="invalid_value")
    return FILE_SEARCH_RESULTS in (include or [])
