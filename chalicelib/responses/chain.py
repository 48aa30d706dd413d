"""A ``previous_response_id`` chain: the stored turns a request continues, walked back from the named response
(tenant-scoped) to its start or to the most recent cached summary's boundary (:func:`chalicelib.responses.store.chain`).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from chalicelib.responses import store


@dataclass(frozen=True)
class Chain:
    """The turns a request continues (oldest first) and the summary of everything before them (or None)."""

    turns: tuple[store.Turn, ...]
    summary: store.Summary | None

    @property
    def tokens(self) -> int:
        """Estimated history tokens: summary + verbatim turns."""
        return (self.summary["tokens"] if self.summary else 0) + sum(t.turn_tokens for t in self.turns)


def load(conn: psycopg.Connection, tenant_id: str, response_id: str, *,
         param: str = "previous_response_id") -> Chain:
    """The chain ending with the tenant's response ``response_id``.

    Raises:
        NotFoundError: (404, ``param``) no such stored response for this tenant (never stored, ``store: false``,
            deleted, or another tenant's).
    """
    turns = store.chain(conn, tenant_id, response_id)
    if not turns:
        raise store.not_found(response_id, param)
    summary = next((t.summary for t in reversed(turns) if t.summary), None)
    if summary is not None:
        turns = [t for t in turns if t.id != summary["through"]]
    return Chain(tuple(turns), summary)
