"""``POST /v1/responses`` request bodies as pydantic models (OPENAI-COMPAT.md §4; SDK ``response_create_params``).

Every field the official SDK may send is declared — used, or accepted and ignored (``reasoning``,
``service_tier``, ``prompt_cache_key``, ``safety_identifier``, ``stream_options``, ``top_logprobs``,
``text.verbosity`` ...) — and any other is a 400 ``unknown_parameter`` naming its path, nested objects included
(``tools[0].frobnicate``), as OpenAI answers (:class:`chalicelib.validation.RequestBody`); types are strict. The
input models also take every field of the SDK's output items, so ``input=previous.output`` replays unchanged —
Engram's own ``memory_search_call`` item included (:class:`MemorySearchCallItem`: any fields, accepted and dropped).
Input items are validated one by one (:func:`parse_input`) so errors name the item (``input[2].content[0].text``).
What Engram does not implement is refused with a 400 naming the field rather than silently ignored: ``background``,
``prompt``, tools other than ``file_search``, ``function`` and ``mcp`` (remote servers by URL: no connectors),
image/file input parts. ``conversation`` is checked by
:func:`chalicelib.responses.conversations.requested`. Engram's extensions (``extra_body``): ``memory`` and ``agent``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from chalicelib.errors import InvalidRequestError
from chalicelib.validation import RequestBody, param_path, supported_values, validate_tagged
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


_Body = RequestBody
# A field accepted for the SDK's sake and not used: any JSON value.
Ignored = Any


class HybridSearch(_Body):
    """``ranking_options.hybrid_search``: both weights required when present."""

    embedding_weight: float = Field(ge=0.0)
    text_weight: float = Field(ge=0.0)

    @model_validator(mode="after")
    def _some_weight(self) -> HybridSearch:
        if self.embedding_weight + self.text_weight <= 0:
            raise ValueError("the weights must not both be 0")
        return self


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
    # Accepted, not used (SDK FunctionToolParam).
    allowed_callers: list[str] | None = None
    defer_loading: bool | None = None
    output_schema: dict[str, Any] | None = None
    run_async: bool | None = Field(default=None, alias="async")

    def echo(self) -> dict[str, Any]:
        """The tool as echoed (``strict`` defaults to true, as OpenAI's Responses API does)."""
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.parameters if self.parameters is not None else {"type": "object", "properties": {}},
                "strict": True if self.strict is None else self.strict}


class McpToolFilter(_Body):
    """An ``mcp`` tool's ``allowed_tools`` object, or one side of ``require_approval``: ``tool_names`` and/or
    ``read_only`` (matches tools annotated ``readOnlyHint``)."""

    tool_names: list[Annotated[str, Field(max_length=128)]] | None = Field(default=None, max_length=MAX_TOOLS)
    read_only: bool | None = None


class McpApprovalFilter(_Body):
    """``require_approval`` as an object: the tools that ``always`` need approval and those that ``never`` do."""

    always: McpToolFilter | None = None
    never: McpToolFilter | None = None


class McpTool(_Body):
    """``{"type": "mcp", "server_label", "server_url", "allowed_tools", "require_approval", "headers",
    "authorization", "server_description"}``: a remote MCP server's tools for the model
    (:mod:`chalicelib.responses.mcp_tool`). ``headers`` and ``authorization`` are sent to the server only: never
    stored, echoed or logged. ``require_approval`` defaults to ``always``, as OpenAI's. Connectors and tunnels
    (``connector_id``, ``tunnel_id``) are OpenAI's own services: refused."""

    type: Literal["mcp"]
    server_label: str = Field(pattern=FUNCTION_NAME)
    server_url: str | None = Field(default=None, min_length=1, max_length=2048)
    allowed_tools: list[Annotated[str, Field(max_length=128)]] | McpToolFilter | None = None
    require_approval: Literal["always", "never"] | McpApprovalFilter | None = None
    headers: dict[str, Annotated[str, Field(max_length=8192)]] | None = None
    authorization: str | None = Field(default=None, max_length=8192)
    server_description: str | None = Field(default=None, max_length=4096)
    connector_id: str | None = None
    tunnel_id: str | None = None
    # Accepted, not used (SDK Mcp).
    allowed_callers: list[str] | None = None
    defer_loading: bool | None = None

    def echo(self) -> dict[str, Any]:
        """The tool as the Response object shows it: no ``authorization``, and ``headers`` null (secrets are sent
        to the server only)."""
        allowed = self.allowed_tools.model_dump(exclude_none=True) if isinstance(self.allowed_tools, McpToolFilter) \
            else self.allowed_tools
        approval = self.require_approval.model_dump(exclude_none=True) \
            if isinstance(self.require_approval, McpApprovalFilter) else (self.require_approval or "always")
        return {"type": "mcp", "server_label": self.server_label, "server_url": self.server_url,
                "allowed_tools": allowed, "require_approval": approval, "headers": None,
                "server_description": self.server_description}


Tool = FileSearchTool | FunctionTool | McpTool


class ToolChoiceFunction(_Body):
    """``{"type": "function", "name": ...}``: force that function on the first model call."""

    type: Literal["function"]
    name: str = Field(pattern=FUNCTION_NAME)


class ToolChoiceFileSearch(_Body):
    """``{"type": "file_search"}``: force a search on the first model call."""

    type: Literal["file_search"]


ToolChoiceOption = Literal["auto", "none", "required"]
ToolChoice = ToolChoiceOption | ToolChoiceFunction | ToolChoiceFileSearch


class _OutputFormatBody(_Body):
    """A ``text.format``: shown in the response as it was sent (:meth:`echo`)."""

    def echo(self) -> dict[str, Any]:
        """As the response shows it: every field under its wire name (SDK ``ResponseFormatTextConfig``)."""
        return self.model_dump(by_alias=True)


class TextFormat(_OutputFormatBody):
    """``text.format`` ``{"type": "text"}``: plain text (the default)."""

    type: Literal["text"]

    def response_format(self) -> dict[str, Any] | None:
        """The chat model's ``response_format`` (None: plain text)."""
        return None


class JsonObjectFormat(_OutputFormatBody):
    """``text.format`` ``{"type": "json_object"}``: JSON mode, the answer is one JSON object (OpenAI asks the
    instructions or input to say so; Engram passes the request on without that check)."""

    type: Literal["json_object"]

    def response_format(self) -> dict[str, Any] | None:
        """The chat model's ``response_format``: ``{"type": "json_object"}``."""
        return {"type": "json_object"}


class JsonSchemaFormat(_OutputFormatBody):
    """``text.format`` ``{"type": "json_schema", "name", "schema", "description"?, "strict"?}``: Structured
    Outputs, the answer is JSON matching ``schema`` (what ``responses.parse(text_format=...)`` and an agent's
    ``output_type`` send). ``name``: OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``."""

    type: Literal["json_schema"]
    name: str = Field(pattern=FUNCTION_NAME)
    schema_: dict[str, Any] = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None

    def response_format(self) -> dict[str, Any] | None:
        """The chat model's ``response_format`` in Chat Completions' shape: ``{"type": "json_schema",
        "json_schema": {"name", "schema", "strict", "description"?}}``."""
        inner: dict[str, Any] = {"name": self.name, "schema": self.schema_, "strict": bool(self.strict)}
        if self.description is not None:
            inner["description"] = self.description
        return {"type": "json_schema", "json_schema": inner}


OutputFormat = TextFormat | JsonObjectFormat | JsonSchemaFormat
_TEXT_FORMATS: dict[str, type[OutputFormat]] = {"text": TextFormat, "json_object": JsonObjectFormat,
                                                "json_schema": JsonSchemaFormat}


class TextConfig(_Body):
    """``text``: its ``format`` (checked by :func:`parse_text_format`); ``verbosity`` accepted and ignored."""

    format: dict[str, Any] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


def parse_text_format(text: TextConfig | None) -> OutputFormat:
    """The request's ``text.format`` (plain text when absent).

    Raises:
        InvalidRequestError: an unknown ``type`` (``param`` ``text.format.type``), a missing or malformed field of
            the format (``text.format.name`` ...).
    """
    if text is None or text.format is None:
        return TextFormat(type="text")
    parsed: OutputFormat = validate_tagged(_TEXT_FORMATS, text.format, prefix="text.format")
    return parsed


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
    # Accepted and not used (SDK ResponseCreateParamsBase): hints for OpenAI's own serving.
    reasoning: dict[str, Any] | None = None
    service_tier: str | None = Field(default=None, max_length=64)
    stream_options: dict[str, Any] | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    prompt_cache_key: str | None = Field(default=None, max_length=1024)
    prompt_cache_options: Ignored = None
    prompt_cache_retention: str | None = Field(default=None, max_length=64)
    safety_identifier: str | None = Field(default=None, max_length=1024)
    context_management: Ignored = None
    moderation: Ignored = None
    image: Ignored = None
    background_options: Ignored = None
    access_programs: Ignored = None
    # Engram extensions (extra_body): memory around the response, and an agent profile's defaults.
    memory: dict[str, Any] | bool | None = None  # checked as MemoryOptions by chalicelib.responses.memory
    agent: str | None = Field(default=None, max_length=128)


class MemoryOptions(RequestBody):
    """Engram's ``memory`` extension (a request's ``extra_body``, an agent profile's or a tenant's defaults): the
    scope (``user_id`` defaults to the request's ``user``; ``agent_id`` to the agent profile's id), whether to
    ``recall`` before the model answers and ``remember`` after, how many memories (``top_k``) scoring at least
    ``score_threshold``, whether earlier ``exchanges`` are recalled too (those with a cosine similarity of at least
    ``exchange_threshold``), and whether long histories are ``summarization``-condensed. Unset fields fall
    through to the next layer (request → agent → tenant → defaults: recall and remember on, 5 memories,
    threshold 0.18, exchanges on with seed 004's 0.65, summarization on)."""

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
    prompt_cache_breakpoint: Ignored = None  # accepted, not used


class OutputText(_Body):
    """``{"type": "output_text", "text", "annotations"}`` (an assistant message replayed as input)."""

    type: Literal["output_text"]
    text: str
    annotations: list[dict[str, Any]] = []
    logprobs: list[Any] | None = None  # accepted, not used


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
    status: str | None = Field(default=None, max_length=64)  # accepted (a replayed output item), not used
    phase: Ignored = None


class FunctionCallItem(_Body):
    """A function call replayed as input: ``{"type": "function_call", "call_id", "name", "arguments"}``."""

    type: Literal["function_call"]
    call_id: str = Field(min_length=1, max_length=128)
    name: str = Field(pattern=FUNCTION_NAME)
    arguments: str
    id: ItemId | None = None
    status: str | None = Field(default=None, max_length=64)  # accepted, not used
    caller: Ignored = None
    namespace: Ignored = None
    run_async: bool | None = Field(default=None, alias="async")


class FunctionCallOutputItem(_Body):
    """The client's result of a function call: ``{"type": "function_call_output", "call_id", "output"}``."""

    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1, max_length=128)
    output: str | list[InputText]
    id: ItemId | None = None
    status: str | None = Field(default=None, max_length=64)  # accepted, not used
    caller: Ignored = None
    name: Ignored = None
    namespace: Ignored = None


class FileSearchResultItem(_Body):
    """One entry of a replayed ``file_search_call.results``."""

    model_config = ConfigDict(extra="forbid", strict=False, defer_build=True)

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


class MemorySearchCallItem(BaseModel):
    """Engram's ``memory_search_call`` output item sent back (``input=previous.output``, an agents SDK's
    ``to_input_list()``, a conversation's items): every field is accepted — the item's own (``id``, ``status``,
    ``queries``, ``results``, ``user_id``, ``agent_id``, ``run_id``, ``usage``, ``memory_job_id``) and any other,
    so items of any Engram version replay — and the item is then dropped: it is neither stored nor shown to the
    model (each response recalls afresh; replaying an old recall would show the model its memories twice).
    Only ``type`` is checked."""

    model_config = ConfigDict(extra="ignore", strict=False, defer_build=True)

    type: Literal["memory_search_call"]
    id: Ignored = None
    status: Ignored = None
    queries: Ignored = None
    results: Ignored = None
    user_id: Ignored = None
    agent_id: Ignored = None
    run_id: Ignored = None
    usage: Ignored = None
    memory_job_id: Ignored = None
    content: Ignored = None


class McpListToolsItem(_Body):
    """An ``mcp_list_tools`` item replayed as input (its tools are then reused, not listed again)."""

    type: Literal["mcp_list_tools"]
    id: ItemId
    server_label: str = Field(max_length=128)
    tools: list[dict[str, Any]] = Field(max_length=1024)
    error: str | None = None


class McpCallItem(_Body):
    """An ``mcp_call`` replayed as input."""

    type: Literal["mcp_call"]
    id: ItemId
    server_label: str = Field(max_length=128)
    name: str = Field(max_length=128)
    arguments: str
    output: str | None = None
    error: dict[str, Any] | str | None = None
    status: str | None = Field(default=None, max_length=64)
    approval_request_id: str | None = Field(default=None, max_length=128)


class McpApprovalRequestItem(_Body):
    """An ``mcp_approval_request`` replayed as input (an approval may then answer it in the same request)."""

    type: Literal["mcp_approval_request"]
    id: ItemId
    server_label: str = Field(max_length=128)
    name: str = Field(max_length=128)
    arguments: str


class McpApprovalResponseItem(_Body):
    """``{"type": "mcp_approval_response", "approval_request_id", "approve", "reason"?}``: the client's answer to
    an ``mcp_approval_request``; approved, the call runs before the model's next turn."""

    type: Literal["mcp_approval_response"]
    approval_request_id: ItemId
    approve: bool
    id: ItemId | None = None
    reason: str | None = Field(default=None, max_length=4096)


McpItem = McpListToolsItem | McpCallItem | McpApprovalRequestItem | McpApprovalResponseItem
InputItem = (MessageItem | FunctionCallItem | FunctionCallOutputItem | FileSearchCallItem | MemorySearchCallItem
             | McpItem)
_ITEM_MODELS: dict[str, type[BaseModel]] = {
    "message": MessageItem, "function_call": FunctionCallItem, "function_call_output": FunctionCallOutputItem,
    "file_search_call": FileSearchCallItem, "memory_search_call": MemorySearchCallItem,
    "mcp_list_tools": McpListToolsItem, "mcp_call": McpCallItem, "mcp_approval_request": McpApprovalRequestItem,
    "mcp_approval_response": McpApprovalResponseItem}


_TOOL_MODELS: dict[str, type[BaseModel]] = {"file_search": FileSearchTool, "function": FunctionTool,
                                            "mcp": McpTool}
_CHOICE_MODELS: dict[str, type[BaseModel]] = {"file_search": ToolChoiceFileSearch, "function": ToolChoiceFunction}
TOOL_CHOICE_OPTIONS: tuple[ToolChoiceOption, ...] = ("auto", "none", "required")


def parse_tools(value: list[dict[str, Any]] | None) -> list[Tool]:
    """The request's ``tools``, typed.

    Raises:
        InvalidRequestError: a tool type other than ``file_search``/``function``/``mcp`` (``param``
            ``tools[i].type``) or an invalid tool (``param`` e.g. ``tools[0].max_num_results``).
    """
    return [validate_tagged(_TOOL_MODELS, raw, prefix=param_path("tools", index))
            for index, raw in enumerate(value or [])]


def parse_tool_choice(value: str | dict[str, Any] | None) -> ToolChoice | None:
    """The request's ``tool_choice``: ``auto | none | required``, ``{"type": "function", "name"}`` or
    ``{"type": "file_search"}``.

    Raises:
        InvalidRequestError: anything else (``param`` ``tool_choice`` or a field of it).
    """
    if value is None or isinstance(value, dict):
        return None if value is None else validate_tagged(_CHOICE_MODELS, value, prefix="tool_choice")
    if value in TOOL_CHOICE_OPTIONS:
        return value
    raise InvalidRequestError(f"Invalid value: {value[:64]!r}. Supported values are: 'auto', 'none', and "
                              "'required' (or an object naming a tool).", param="tool_choice", code="invalid_value")


def parse_input(value: str | list[dict[str, Any]], *, param: str = "input",
                max_items: int = MAX_INPUT_ITEMS) -> list[InputItem]:
    """The request's ``input`` (or another list of input items, named ``param``, e.g. a conversation's ``items``)
    as typed items: a string is one user message. ``memory_search_call`` items are returned too (as
    :class:`MemorySearchCallItem`); :func:`chalicelib.responses.items.input_items` drops them.

    Raises:
        InvalidRequestError: an empty list, more than ``max_items`` items, an item of an unsupported type, or an
            invalid item (``param`` is the item's path, e.g. ``input[1].call_id``).
    """
    if isinstance(value, str):
        return [MessageItem(role="user", content=value)]
    if not value:
        raise InvalidRequestError(f"Invalid '{param}': empty array. Expected an array with minimum length 1, but got "
                                  "an empty array instead.", param=param, code="empty_array")
    if len(value) > max_items:
        raise InvalidRequestError(f"Invalid '{param}': array too long. Expected an array with maximum length "
                                  f"{max_items}, but got an array with length {len(value)} instead.", param=param,
                                  code="array_above_max_length")
    return [validate_tagged(_ITEM_MODELS, raw, prefix=param_path(param, index), default="message")
            for index, raw in enumerate(value)]


def include_results(include: list[str] | None) -> bool:
    """Whether ``include`` (a request's or a query's values) asks for ``file_search_call.results``.

    Raises:
        InvalidRequestError: (400, ``include[<i>]``, ``invalid_value``) a value that is not one of :data:`INCLUDABLE`.
    """
    for i, value in enumerate(include or []):
        if value not in INCLUDABLE:
            raise InvalidRequestError(f"Invalid value: {value[:80]!r}. Supported values are: "
                                      f"{supported_values(sorted(INCLUDABLE))}.",
                                      param=param_path("include", i), code="invalid_value")
    return FILE_SEARCH_RESULTS in (include or [])
