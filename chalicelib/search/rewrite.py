"""``rewrite_query``: a search query rewritten for retrieval by the configured chat model.

OpenAI's vector-store search rewrites the query "for vector search" when ``rewrite_query`` is true and returns the
rewritten text as ``search_query``. Engram asks the model named by ``ENGRAM_CHAT_MODEL`` (``settings.chat_model``)
through its chat backend (:func:`chalicelib.deps.chat_backend`) with a short instruction, one call per query.

The original query is kept — and the search runs as if ``rewrite_query`` were false — when no chat model is
configured, when no backend answers that model, when the call fails (after the backend's own retries), or when the
answer is empty or implausibly long; each failure is logged (logger ``engram.search``), never raised: a search
must not fail because an optional rewrite did.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from chalicelib.chat import prompts
from chalicelib.chat.base import ChatMessage, ChatRequest
from chalicelib.config import Settings

__all__ = ["INSTRUCTION", "rewrite_queries", "rewrite_query"]

logger = logging.getLogger("engram.search")

# The instruction (chalicelib.chat.prompts.QUERY_REWRITE, with every other prompt).
INSTRUCTION = prompts.QUERY_REWRITE.system
# Tokens the rewritten query may take; a search query is a line, not a paragraph.
MAX_OUTPUT_TOKENS = 100
# A rewrite longer than this many characters (or 4 × the query, whichever is more) is rejected as not a query.
MIN_LENGTH_LIMIT = 400


def rewrite_query(settings: Settings, query: str) -> str:
    """``query`` rewritten by ``settings.chat_model``, or ``query`` itself when no model is configured or the
    rewrite failed (see the module docstring). Never raises for a backend failure."""
    model = settings.chat_model
    if not model:
        return query
    from chalicelib import deps

    try:
        backend = deps.chat_backend(model, settings)
        answer = backend.complete(ChatRequest(
            model=model, messages=[ChatMessage("system", INSTRUCTION), ChatMessage("user", query)],
            max_output_tokens=MAX_OUTPUT_TOKENS, temperature=0.0))
    except Exception as exc:  # documented: a failed rewrite never fails the search
        logger.warning("query rewrite failed; searching with the original query",
                       extra={"model": model, "error": type(exc).__name__, "detail": str(exc)[:300]})
        return query
    rewritten = _first_line(answer.text)
    if not rewritten or len(rewritten) > max(MIN_LENGTH_LIMIT, 4 * len(query)):
        logger.warning("query rewrite unusable; searching with the original query",
                       extra={"model": model, "answer_chars": len(answer.text)})
        return query
    return rewritten


def rewrite_queries(settings: Settings, queries: Sequence[str]) -> list[str]:
    """Each of ``queries`` through :func:`rewrite_query`, in order."""
    return [rewrite_query(settings, q) for q in queries]


def _first_line(text: str) -> str:
    """The answer's first non-blank line without surrounding quotes or a ``Query:`` label."""
    for line in text.strip().splitlines():
        line = line.strip().strip('"').strip("'").strip()
        if line.lower().startswith(("query:", "rewritten query:")):
            line = line.split(":", 1)[1].strip().strip('"').strip("'").strip()
        if line:
            return line
    return ""
