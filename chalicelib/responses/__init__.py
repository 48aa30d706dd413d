"""OpenAI's Responses API over Engram's knowledge: the agentic loop with ``file_search``, citations, streaming
events, stored responses and conversation history with summarization (OPENAI-COMPAT.md §4).

Modules, one concept each: :mod:`schemas` (request bodies), :mod:`items` (input/output items and their chat
messages), :mod:`tokens` (token estimates), :mod:`citations` (citation markers → ``file_citation``),
:mod:`tools` (the server-side ``file_search`` tool), :mod:`events` (SSE event dicts), :mod:`sse` (wire encoding),
:mod:`objects` (the Response object), :mod:`store` (the ``responses`` table), :mod:`history` (chains →
messages), :mod:`chain` (conversation chains), :mod:`summarize` (conversation summaries), :mod:`loop` (model ↔
tools), :mod:`service` (the entry points the HTTP routes and :mod:`chalicelib.api.streaming_front` call).

Import them by name: this file imports nothing (the routes load the Responses code on first use).
"""

__all__ = [
    "chain",
    "citations",
    "events",
    "history",
    "items",
    "loop",
    "objects",
    "schemas",
    "service",
    "sse",
    "store",
    "summarize",
    "tokens",
    "tools",
]
