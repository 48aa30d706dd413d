"""The Responses API's entry points, shared by the Chalice routes and the streaming front.

:func:`stream_events` validates a ``POST /v1/responses`` body completely — raising :mod:`chalicelib.errors`
classes before anything is yielded — then yields every stream event in order, ending with ``response.completed``,
``response.incomplete`` or ``response.failed``. :func:`create_response` consumes the same events and returns the
final Response object, so streamed and non-streamed results are identical field for field; when the response
failed it raises the error instead (the HTTP status fits it: 502/504 for the model backend, 429, 400 …).

A stored response (``store`` true, the default) is written before its final event, so it can be retrieved and
chained as soon as the client sees it complete; failed responses are stored too. A stream abandoned by its
client is not stored.

Memory (:mod:`chalicelib.responses.memory`) stays invisible to clients that did not ask to see it: recall's
``memory_search_call`` item is output item 0 only when ``include`` has ``memory_search_call.results`` (streamed
as ``response.output_item.added``/``.done`` right after ``response.in_progress``, OpenAI's order), and is stored
with the response and shown on retrieval only then; otherwise ``output`` holds OpenAI's item types alone and what
recall did is in ``usage.memory``. The ``response.created`` and ``response.in_progress`` snapshots always have
``output: []``. The item is never part of a conversation's items, and one sent back as input is dropped.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg

from chalicelib import deps, ids
from chalicelib.access import FULL, Access, fill_scope, hold_scope
from chalicelib.chat.base import ChatMessage, ToolSpec
from chalicelib.config import Settings
from chalicelib.errors import EngramError, InvalidRequestError, RateLimitError
from chalicelib.memory import MemoryScope, thread_of
from chalicelib.memory import context as memory_context
from chalicelib.responses import agents, citations, conversations, history, items, loop, memory, schemas, store, tools
from chalicelib.responses import chain as chains
from chalicelib.responses import conversations_store as cstore
from chalicelib.responses.events import Emitter
from chalicelib.responses.objects import ResponseState, deleted, is_memory_item, visible, visible_items
from chalicelib.responses.tokens import messages_tokens
from chalicelib.responses.turns import Chain
from chalicelib.store.db import tenant_connection
from chalicelib.store.paging import Page
from chalicelib.validation import param_path

logger = logging.getLogger("engram.responses")

_GENERIC = "The server had an error while processing your request."
# A summary threshold no history reaches: summarization off (an agent's or a request's memory settings).
NEVER_SUMMARIZE = 1 << 62


@dataclass
class Run:
    """A validated request ready to run: :meth:`events` produces it (once)."""

    settings: Settings
    tenant_id: str
    state: ResponseState
    config: loop.LoopConfig
    input_items: list[dict[str, Any]]
    history: history.History
    store: bool
    previous_response_id: str | None
    memory_plan: memory.MemoryPlan | None = None
    recalled: memory.Recalled | None = None
    include_memory: bool = False
    thread_id: str | None = None
    conversation_id: str | None = None
    question: str = ""
    error: EngramError | None = field(default=None, init=False)

    def events(self) -> Iterator[dict[str, Any]]:
        """The stream events, ``response.created`` first; sets :attr:`error` when the response fails. The
        ``created`` and ``in_progress`` snapshots have ``output: []``; an included ``memory_search_call`` item
        (recall ran before the first model call) follows as output 0 (``output_item.added``, ``.done``)."""
        emit, state, shown = Emitter(), self.state, self.config.include_results

        def body(with_output: bool = True) -> dict[str, Any]:
            return state.body(include_results=shown, include_memory=self.include_memory, with_output=with_output)

        yield emit.lifecycle("created", body(with_output=False))
        yield emit.lifecycle("in_progress", body(with_output=False))
        if state.output and is_memory_item(state.output[0]):  # included: output 0, already complete
            yield emit.item_added(0, state.output[0])
            yield emit.item_done(0, state.output[0])
        try:
            yield from loop.run(self.config, state, emit)
            state.finish("incomplete" if state.incomplete_details else "completed")
        except EngramError as exc:
            self._fail(exc, exc)
        except Exception as exc:  # a bug or an unexpected driver error: logged, reported generically
            logger.exception("response %s failed", state.id)
            self._fail(EngramError(_GENERIC), exc)
        skipped = self._not_remembered()
        if skipped is not None and state.memory_usage is not None:
            memory.remembered(state.memory_usage, "skipped", skipped)
        if self.store or self.conversation_id is not None:
            try:
                with tenant_connection(self.settings, self.tenant_id) as conn:
                    if skipped is None:
                        self._remember(conn)
                    self._persist(conn)
            except Exception as exc:
                logger.exception("storing response %s failed", state.id)
                self._fail(EngramError(_GENERIC), exc)
        final = {"completed": "completed", "incomplete": "incomplete"}.get(state.status, "failed")
        yield emit.lifecycle(final, body())

    def _not_remembered(self) -> str | None:
        """Why this response's exchange is not remembered (None: it is, or memory is off or not remembering, which
        ``usage.memory`` already says). ``store: false`` asks that nothing of the exchange be kept: recall still
        runs (it only reads), but nothing is remembered."""
        plan, state = self.memory_plan, self.state
        if plan is None or not plan.remember:
            return None
        if not self.store:
            return "store=false"
        if state.status != "completed":
            return f"the response is {state.status}"
        return None

    def _remember(self, conn: psycopg.Connection) -> None:
        """Dispatch the memory job of a completed, stored response (never fails it: see :mod:`responses.memory`)."""
        plan, state = self.memory_plan, self.state
        if plan is None or not plan.remember:
            return
        answer = "\n\n".join(items.text_of(item) for item in state.output if item.get("type") == "message")
        status, reason, job_id = memory.remember(
            conn, self.settings, self.tenant_id, plan, response_id=state.id, thread_id=self.thread_id or state.id,
            prompt=self.question, answer=answer, prior_ids=self.recalled.prior_ids if self.recalled else [])
        if self.recalled is not None:
            self.recalled.item["memory_job_id"] = job_id
        if state.memory_usage is not None:
            memory.remembered(state.memory_usage, status, reason, job_id)

    def _fail(self, error: EngramError, cause: BaseException) -> None:
        self.error = error
        code = ("rate_limit_exceeded" if isinstance(error, RateLimitError)
                else "invalid_prompt" if isinstance(error, InvalidRequestError) else "server_error")
        self.state.error = {"code": code, "message": error.message}
        for item in self.state.output:
            if item.get("status") in ("in_progress", "searching"):
                item["status"] = "failed" if item["type"] == "file_search_call" else "incomplete"
        self.state.finish("failed")

    def _persist(self, conn: psycopg.Connection) -> None:
        """Store the response (``store``) and add its turn to its conversation, in one transaction. A response in
        a conversation caches its summary there, and its own history is its turn alone; its turn never includes
        the ``memory_search_call`` item (stored with the response only when it was included)."""
        state = self.state
        turn = [item for item in (*self.input_items, *state.output) if not is_memory_item(item)]
        turn_tokens = messages_tokens(items.to_messages(turn))
        computed = self.history.summary if self.history.computed else None
        joined = self.conversation_id is not None
        with conn.transaction():
            if self.store:
                store.insert(conn, store.StoredResponse(
                    id=state.id, tenant_id=self.tenant_id, previous_response_id=self.previous_response_id,
                    created_at=None, status=state.status, response=state.body(include_results=True),
                    input_items=self.input_items, turn_tokens=turn_tokens,
                    history_tokens=turn_tokens if joined else self.history.tokens + turn_tokens,
                    summary=None if joined else computed))
            if self.conversation_id is not None:
                conversations.record_turn(conn, self.tenant_id, self.conversation_id, response_id=state.id,
                                          turn_items=turn if state.status in ("completed", "incomplete") else None,
                                          summary=computed)


def stream_events(settings: Settings, tenant_id: str, body: dict[str, Any], *,
                  access: Access = FULL) -> Iterator[dict[str, Any]]:
    """Validate ``body`` (a ``POST /v1/responses`` JSON object) and return the iterator of its stream events.
    ``access``: what the caller's API key may do besides creating responses (:func:`_permitted`).

    Raises (before any event):
        InvalidRequestError: (400) invalid or unsupported fields, unanswered function calls, an ``input`` with
            nothing for the model to read (only ``memory_search_call`` items, which are dropped), no backend
            configured for the model (param ``model``).
        NotFoundError: (404) ``previous_response_id``, ``conversation`` or a vector store unknown to the tenant.
        UpstreamError / UpstreamTimeoutError / RateLimitError: summarizing a long history failed.
        PermissionDeniedError: (403) a ``file_search`` tool without ``vector_stores.read``, memory asked for without
            ``memories.read`` / ``write``, or a memory scope the key is not bound to.
    """
    return prepare(settings, tenant_id, body, access=access).events()


def create_response(settings: Settings, tenant_id: str, body: dict[str, Any], *,
                    access: Access = FULL) -> dict[str, Any]:
    """The non-streaming result: the Response object of the final event of :func:`stream_events`.

    Raises:
        what :func:`stream_events` raises; and, when the response failed, the error that failed it.
    """
    run = prepare(settings, tenant_id, body, access=access)
    final: dict[str, Any] = {}
    for event in run.events():
        final = event
    if run.error is not None:
        raise run.error
    return final["response"]


def prepare(settings: Settings, tenant_id: str, body: dict[str, Any], *, access: Access = FULL) -> Run:
    """Check a request and gather what it needs (agent profile, backend, stores, history, memories); see
    :func:`stream_events`. Every read happens on one tenant connection, given back before any model call."""
    with tenant_connection(settings, tenant_id) as conn:
        gathered = _gather(conn, settings, tenant_id, body, access)
    return _assemble(gathered)


@dataclass(frozen=True)
class _Gathered:
    """A checked request and what its reads found (:func:`_gather`), ready to assemble into a :class:`Run`."""

    settings: Settings
    tenant_id: str
    req: schemas.CreateResponse
    new_items: list[dict[str, Any]]
    parsed_tools: list[schemas.Tool]
    functions: list[schemas.FunctionTool]
    searcher: tools.FileSearch | None
    backend: Any
    chain: Chain | None
    plan: memory.MemoryPlan | None
    recalled: memory.Recalled | None
    include_results: bool
    include_memory: bool
    choice: str | dict[str, Any]
    thread_id: str | None
    conversation_id: str | None
    question: str
    output_format: schemas.OutputFormat
    mcp: Any = None  # the request's MCP servers (mcp_tool.Setup), None without mcp tools


def _gather(conn: psycopg.Connection, settings: Settings, tenant_id: str, body: dict[str, Any],
            access: Access = FULL) -> _Gathered:
    """Check the request and do every read it needs on ``conn`` (see :func:`stream_events` for the errors)."""
    from chalicelib.validation import validate

    profile, tenant_memory = _profile_and_defaults(conn, tenant_id, body)
    if profile is not None:
        body = agents.merge(body, profile)
    req = validate(schemas.CreateResponse, body)
    _refuse_unsupported(req)
    conversation_id = conversations.requested(req.conversation, previous_response_id=req.previous_response_id)
    new_items = items.input_items(schemas.parse_input(req.input))
    parsed_tools = schemas.parse_tools(req.tools)
    output_format = schemas.parse_text_format(req.text)
    file_search_tool, functions = _tools(parsed_tools)
    include_results = _include(req.include)
    include_memory = schemas.MEMORY_SEARCH_RESULTS in (req.include or [])
    requested = req.memory
    if access.memory_scope and (requested is True or isinstance(requested, dict)):  # a bound key's scope
        requested = fill_scope(access, requested if isinstance(requested, dict) else {})
    plan = memory.resolve(requested, agent_memory=profile.memory if profile else None,
                          agent_id=profile.id if profile else None, tenant_defaults=tenant_memory, user=req.user)
    plan = _permitted(access, plan, explicit=requested is True or isinstance(requested, dict),
                      searches=file_search_tool is not None)
    choice = _tool_choice(schemas.parse_tool_choice(req.tool_choice), file_search_tool, functions,
                          has_mcp=any(isinstance(t, schemas.McpTool) for t in parsed_tools))
    if req.previous_response_id is not None:
        ids.validate_id(req.previous_response_id, ids.RESPONSE, param="previous_response_id")
    searcher = None
    if file_search_tool is not None:  # its filters and stores are the request's: checked before the backend
        index = next(i for i, t in enumerate(parsed_tools) if t is file_search_tool)
        searcher = tools.prepare(conn, settings, tenant_id, file_search_tool, index=index)
    backend = deps.chat_backend(req.model, settings)
    chain = _continued(conn, tenant_id, req.previous_response_id, conversation_id, new_items)
    mcp = _mcp(settings, parsed_tools, chain, new_items)
    thread_id = conversation_id
    if thread_id is None and req.previous_response_id is not None and chain is not None:
        if plan is not None:  # the thread the previous turn belongs to, else the chain's first response
            thread_id = thread_of(conn, memory_context(settings, tenant_id), req.previous_response_id)
        thread_id = thread_id or (chain.turns[0].id if chain.turns else req.previous_response_id)
    question = _question(new_items, chain)
    recalled = None
    if plan is not None and plan.recall:
        recalled = memory.recall_for(conn, settings, tenant_id, plan, question)
    return _Gathered(settings, tenant_id, req, new_items, parsed_tools, functions, searcher, backend, chain, plan,
                     recalled, include_results=include_results, include_memory=include_memory, choice=choice,
                     thread_id=thread_id, conversation_id=conversation_id, question=question,
                     output_format=output_format, mcp=mcp)


def _assemble(g: _Gathered) -> Run:
    """The :class:`Run` of a checked request: its history (condensed by a model call when it is long: after the
    request's reads, with no connection held), messages, state and loop configuration.

    Raises:
        InvalidRequestError: (400) nothing for the model to read, unanswered function calls.
        UpstreamError / UpstreamTimeoutError / RateLimitError: summarizing a long history failed.
    """
    settings, tenant_id, req, new_items, plan, recalled = g.settings, g.tenant_id, g.req, g.new_items, g.plan, \
        g.recalled
    chain, searcher, functions, include_memory = g.chain, g.searcher, g.functions, g.include_memory
    summarizing = settings if plan is None or plan.summarization else dataclasses.replace(
        settings, summary_threshold_tokens=NEVER_SUMMARIZE)
    past = history.build(summarizing, chain, model=req.model) if chain is not None else history.EMPTY
    system = "\n\n".join(part for part in (req.instructions, recalled.block if recalled else None,
                                            citations.GUIDE if searcher else None, past.preamble) if part)
    messages = ([ChatMessage("system", system)] if system else []) + list(past.messages)
    messages += items.to_messages(new_items)
    if not messages:  # e.g. only memory_search_call items, which are dropped: nothing for the model to read
        raise InvalidRequestError("Invalid 'input': no item the model can read (memory_search_call items are "
                                  "accepted and ignored).", param="input", code="invalid_value")
    items.check_tool_outputs(messages)
    state = ResponseState(id=ids.new_id(ids.RESPONSE), model=req.model,
                          echo=_echo(req, g.parsed_tools, g.conversation_id, g.output_format))
    state.summary_usage = past.usage
    if plan is not None:  # what recall did is always in usage.memory; the item itself only when included
        state.memory_usage = memory.usage_of(recalled, plan)
        if recalled is not None and include_memory:
            state.output.append(recalled.item)
    config = loop.LoopConfig(
        backend=g.backend, model=req.model, messages=tuple(messages),
        function_tools=tuple(ToolSpec(f.name, f.description or "", f.echo()["parameters"]) for f in functions),
        file_search=searcher, tool_choice=g.choice,
        parallel_tool_calls=req.parallel_tool_calls is not False,
        max_tool_calls=req.max_tool_calls if req.max_tool_calls is not None else loop.DEFAULT_MAX_TOOL_CALLS,
        include_results=g.include_results, max_output_tokens=req.max_output_tokens, temperature=req.temperature,
        top_p=req.top_p, sources=past.sources, response_format=g.output_format.response_format(), mcp=g.mcp)
    return Run(settings=settings, tenant_id=tenant_id, state=state, config=config, input_items=new_items,
               history=past, store=req.store is not False, previous_response_id=req.previous_response_id,
               memory_plan=plan, recalled=recalled, include_memory=include_memory, thread_id=g.thread_id,
               conversation_id=g.conversation_id, question=g.question)


def _permitted(access: Access, plan: memory.MemoryPlan | None, *, explicit: bool,
               searches: bool) -> memory.MemoryPlan | None:
    """The memory plan the caller's key allows (:mod:`chalicelib.access`): recalling needs ``memories.read`` and
    remembering ``memories.write``; a plan the request asked for (``memory``) is refused when the key lacks
    either, one that only an agent profile's or the tenant's defaults turned on keeps what the key allows (None:
    nothing). The plan's scope is held to the key's memory scope. A ``file_search`` tool needs
    ``vector_stores.read``.

    Raises:
        PermissionDeniedError: (403) a missing permission, or a scope naming another value for a bound id.
    """
    if searches:
        access.require("vector_stores", "read")
    if plan is None:
        return None
    if explicit:
        if plan.recall:
            access.require("memories", "read")
        if plan.remember:
            access.require("memories", "write")
    recall = plan.recall and access.allows("memories", "read")
    remember = plan.remember and access.allows("memories", "write")
    if not recall and not remember and not explicit:
        return None
    if not recall and not remember:  # explicit, with recall and remember both off: nothing to permit
        return plan
    scope = plan.scope
    if access.memory_scope:
        scope = MemoryScope(**hold_scope(access.memory_scope, scope.as_dict()))
    return dataclasses.replace(plan, scope=scope, recall=recall, remember=remember)


def _profile_and_defaults(conn: psycopg.Connection, tenant_id: str,
                          body: dict[str, Any]) -> tuple[agents.Agent | None, dict[str, Any] | None]:
    """The agent profile the request names (``agent``) and the tenant's memory defaults.

    Raises:
        InvalidRequestError: a malformed agent id. NotFoundError: no such agent for this tenant.
    """
    from chalicelib.store import tenants

    agent_id = body.get("agent")
    if agent_id is not None and isinstance(agent_id, str):
        ids.validate_id(agent_id, ids.AGENT, param="agent")
    profile = agents.get(conn, tenant_id, agent_id, param="agent") if isinstance(agent_id, str) else None
    return profile, tenants.memory_defaults(conn, tenant_id)


def _last_user_text(input_items: list[dict[str, Any]]) -> str:
    """The text of the request's last user message (what recall searches for and an exchange keeps)."""
    for item in reversed(input_items):
        if item.get("type") == "message" and item.get("role") == "user":
            return items.text_of(item)
    return ""


def _question(new_items: list[dict[str, Any]], chain: Chain | None) -> str:
    """The user message a request answers (what recall searches for and the remembered exchange keeps): the
    request's last user message; for a request that sends none (the function outputs of a tool loop chained by
    ``previous_response_id`` or a conversation), the last user message of the turns it continues, so the memories
    shown for a question stay in view until it is answered and the answer is remembered with its question. ""
    when there is none."""
    text = _last_user_text(new_items)
    if text or chain is None:
        return text
    return next((t for t in (_last_user_text(turn.input_items) for turn in reversed(chain.turns)) if t), "")


def _continued(conn: psycopg.Connection, tenant_id: str, previous_response_id: str | None,
               conversation_id: str | None, new_items: list[dict[str, Any]]) -> Chain | None:
    """The turns a request continues: its conversation's or its ``previous_response_id`` chain (None: neither).

    Raises:
        NotFoundError: (404) no such conversation or stored response for this tenant.
        InvalidRequestError: (400) an input item reusing the id of a conversation's item.
    """
    if conversation_id is not None:
        return conversations.load_chain(conn, tenant_id, conversation_id, new_items)
    if previous_response_id is not None:
        return chains.load(conn, tenant_id, previous_response_id)
    return None


def _refuse_unsupported(req: schemas.CreateResponse) -> None:
    if req.background:
        raise InvalidRequestError("Background responses are not supported; omit 'background' or set it to false.",
                                  param="background", code="unsupported_parameter")
    if req.prompt is not None:
        raise InvalidRequestError("'prompt' is not supported; send the prompt's text as 'instructions' and 'input'.",
                                  param="prompt", code="unsupported_parameter")


def _tools(parsed: list[schemas.Tool]) -> tuple[schemas.FileSearchTool | None, list[schemas.FunctionTool]]:
    searches = [t for t in parsed if isinstance(t, schemas.FileSearchTool)]
    functions = [t for t in parsed if isinstance(t, schemas.FunctionTool)]
    if len(searches) > 1:
        raise InvalidRequestError("At most one file_search tool is allowed; list every vector store in its "
                                  "'vector_store_ids'.", param="tools", code="invalid_value")
    names = [f.name for f in functions]
    for i, name in enumerate(names):
        if name == items.FILE_SEARCH_TOOL or name in names[:i]:
            raise InvalidRequestError(f"Duplicate or reserved function name {name!r}.",
                                      param=param_path("tools", parsed.index(functions[i]), "name"),
                                      code="invalid_value")
    return (searches[0] if searches else None), functions


def _mcp(settings: Settings, parsed_tools: list[schemas.Tool], chain: Chain | None,
         new_items: list[dict[str, Any]]) -> Any:
    """The request's MCP servers and what its context already holds (:func:`chalicelib.responses.mcp_tool.prepare`;
    the module is imported only by requests that use it)."""
    wanted = [(i, t) for i, t in enumerate(parsed_tools) if isinstance(t, schemas.McpTool)]
    if not wanted and not any(item.get("type") == "mcp_approval_response" for item in new_items):
        return None
    from chalicelib.responses import mcp_tool

    context = [item for turn in (chain.turns if chain else ()) for item in (*turn.input_items, *turn.output)]
    return mcp_tool.prepare(settings, wanted, context, new_items)


def _include(include: list[str] | None) -> bool:
    return schemas.include_results(include)


def _tool_choice(choice: schemas.ToolChoice | None, file_search_tool: Any,
                 functions: list[schemas.FunctionTool], *, has_mcp: bool = False) -> str | dict[str, Any]:
    """The first model call's tool choice in the backend's terms (``{"name": ...}`` to force one tool)."""
    if choice is None or choice == "auto" or choice == "none":
        return choice or "auto"
    if choice == "required":
        if file_search_tool is None and not functions and not has_mcp:
            raise InvalidRequestError("tool_choice 'required' needs at least one tool.", param="tool_choice",
                                      code="invalid_value")
        return "required"
    if isinstance(choice, schemas.ToolChoiceFileSearch):
        if file_search_tool is None:
            raise InvalidRequestError("tool_choice names file_search, but no file_search tool is given.",
                                      param="tool_choice", code="invalid_value")
        return {"name": items.FILE_SEARCH_TOOL}
    if choice.name not in {f.name for f in functions}:
        raise InvalidRequestError(f"tool_choice names function {choice.name!r}, which is not among 'tools'.",
                                  param="tool_choice.name", code="invalid_value")
    return {"name": choice.name}


def _echo(req: schemas.CreateResponse, parsed_tools: list[schemas.Tool], conversation_id: str | None,
          output_format: schemas.OutputFormat) -> dict[str, Any]:
    choice = schemas.parse_tool_choice(req.tool_choice) or "auto"
    tool_choice = choice if isinstance(choice, str) else choice.model_dump()
    return {"instructions": req.instructions, "previous_response_id": req.previous_response_id,
            "store": req.store is not False, "metadata": req.metadata or {},
            "tools": [t.echo() for t in parsed_tools], "tool_choice": tool_choice,
            "parallel_tool_calls": req.parallel_tool_calls is not False, "max_tool_calls": req.max_tool_calls,
            "max_output_tokens": req.max_output_tokens, "temperature": req.temperature, "top_p": req.top_p,
            "text": {"format": output_format.echo()}, "truncation": req.truncation or "disabled", "user": req.user,
            "conversation": {"id": conversation_id} if conversation_id is not None else None}


# ---- stored responses ----

def retrieve(settings: Settings, tenant_id: str, response_id: str, *, include: list[str] | None = None) -> dict:
    """A stored response (``file_search_call.results`` only when included; a ``memory_search_call`` item, stored
    only when its response included it, shown only when included again: see :func:`objects.visible`).

    Raises:
        InvalidRequestError: (400) a malformed id or include value.
        NotFoundError: (404) no such response for this tenant.
    """
    ids.validate_id(response_id, ids.RESPONSE, param="response_id")
    shown = _include(include)
    with tenant_connection(settings, tenant_id) as conn:
        row = store.get(conn, tenant_id, response_id)
    return visible(row.response, include_results=shown,
                   include_memory=schemas.MEMORY_SEARCH_RESULTS in (include or []))


def list_responses(settings: Settings, tenant_id: str, page: Page, *, conversation_id: str | None = None,
                   include: list[str] | None = None) -> tuple[list[dict[str, Any]], bool]:
    """``GET /v1/responses`` (Engram's): one page of the tenant's stored responses, newest first by default — of
    one conversation when ``conversation_id`` is given — each as :func:`retrieve` shows it: ``(objects,
    has_more)``.

    Raises:
        InvalidRequestError: (400) a malformed conversation id or include value.
        NotFoundError: (404) no such conversation for this tenant.
    """
    shown = _include(include)
    with tenant_connection(settings, tenant_id) as conn:
        if conversation_id is not None:
            cstore.get(conn, tenant_id, ids.validate_id(conversation_id, ids.CONVERSATION, param="conversation"),
                       param="conversation")
        rows, has_more = store.list_page(conn, tenant_id, page, conversation_id=conversation_id)
    return [visible(row.response, include_results=shown,
                    include_memory=schemas.MEMORY_SEARCH_RESULTS in (include or [])) for row in rows], has_more


def delete(settings: Settings, tenant_id: str, response_id: str) -> dict[str, Any]:
    """Delete a stored response: ``{"id", "object": "response", "deleted": true}``.

    Raises:
        InvalidRequestError: (400) a malformed id.
        NotFoundError: (404) no such response for this tenant.
    """
    ids.validate_id(response_id, ids.RESPONSE, param="response_id")
    with tenant_connection(settings, tenant_id) as conn:
        store.delete(conn, tenant_id, response_id)
    return deleted(response_id)


def input_items(settings: Settings, tenant_id: str, response_id: str, page: Page, *,
                include: list[str] | None = None) -> tuple[list[dict[str, Any]], bool]:
    """One page of a stored response's input items: ``(items, has_more)``.

    Raises:
        InvalidRequestError: (400) a malformed id.
        NotFoundError: (404) no such response for this tenant.
    """
    ids.validate_id(response_id, ids.RESPONSE, param="response_id")
    shown = _include(include)
    with tenant_connection(settings, tenant_id) as conn:
        data, has_more = store.input_items_page(conn, tenant_id, response_id, page)
    return visible_items(data, include_results=shown,
                         include_memory=schemas.MEMORY_SEARCH_RESULTS in (include or [])), has_more


def cancel(settings: Settings, tenant_id: str, response_id: str) -> dict[str, Any]:
    """``POST /v1/responses/{id}/cancel``: only background responses can be cancelled (OpenAI answers 400 for
    others), and Engram runs none, so a stored response gets that 400.

    Raises:
        InvalidRequestError: (400) the response was not created with ``background: true``.
        NotFoundError: (404) no such response for this tenant.
    """
    ids.validate_id(response_id, ids.RESPONSE, param="response_id")
    with tenant_connection(settings, tenant_id) as conn:
        store.get(conn, tenant_id, response_id)
    raise InvalidRequestError("Only responses created with background=true can be cancelled.",
                              param="response_id", code="invalid_request")
