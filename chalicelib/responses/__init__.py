"""OpenAI's Responses API over Engram's knowledge: the agentic loop with ``file_search``, citations, streaming
events, stored responses, conversations and conversation history with summarization (OPENAI-COMPAT.md §4).

Modules, one concept each: :mod:`schemas` (request bodies), :mod:`items` (input/output items and their chat
messages), :mod:`tokens` (token estimates), :mod:`citations` (citation markers → ``file_citation``),
:mod:`tools` (the server-side ``file_search`` tool), :mod:`events` (SSE event dicts), :mod:`sse` (wire encoding),
:mod:`objects` (the Response object), :mod:`store` (the ``responses`` table), :mod:`turns` (history as turns and
a summary), :mod:`history` (turns → messages), :mod:`chain` (``previous_response_id`` chains),
:mod:`conversations` (the Conversations API and conversations as history) over :mod:`conversations_store` (its
tables), :mod:`summarize` (conversation summaries), :mod:`loop` (model ↔ tools), :mod:`service` (the entry points
the HTTP routes and :mod:`chalicelib.api.streaming_front` call).

Import them by name: this file imports nothing (the routes load the Responses code on first use).
"""

__all__ = [
    "chain",
    "citations",
    "conversations",
    "conversations_store",
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
    "turns",
]
