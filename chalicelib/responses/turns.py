"""A conversation's past as data: turns, oldest first, and the summary of what came before them.

This is the one shape history building (:mod:`history`) and summarization (:mod:`summarize`) work on, whatever the
turns come from: a ``previous_response_id`` chain (:mod:`chain`: one turn per stored response) or a conversation
(:mod:`conversations`: one turn per write — a response's input and output items, or one items call). A turn is
never split by summarization, so a call and its output added together stay together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict


class Summary(TypedDict):
    """A conversation summary (:mod:`chalicelib.responses.summarize`): its ``text``, the last turn it folds in
    (``through``: a response id for chains, the turn's last item id for conversations), its estimated
    ``tokens``, how many ``turns`` it covers, the ``model`` that wrote it and the ``prompt`` tag, that call's
    ``input_tokens``/``output_tokens`` and ``created_at`` (Unix seconds)."""

    text: str
    through: str
    tokens: int
    turns: int
    model: str
    prompt: NotRequired[str]
    input_tokens: int
    output_tokens: int
    created_at: int


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of history: its ``id`` (a response id, or a conversation turn's last item id), its items in
    order (``input_items`` then ``output``; a conversation turn keeps all its items in ``input_items``), its
    estimated ``turn_tokens`` (:mod:`chalicelib.responses.tokens`) and the summary cached with it, if any."""

    id: str
    input_items: list[dict[str, Any]]
    output: list[dict[str, Any]]
    turn_tokens: int
    summary: Summary | None


@dataclass(frozen=True)
class Chain:
    """The turns a request continues (oldest first) and the summary of everything before them (or None)."""

    turns: tuple[Turn, ...]
    summary: Summary | None

    @property
    def tokens(self) -> int:
        """Estimated history tokens: summary + verbatim turns."""
        return (self.summary["tokens"] if self.summary else 0) + sum(t.turn_tokens for t in self.turns)
