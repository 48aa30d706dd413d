"""A ``previous_response_id`` chain: the stored turns a request continues, walked back from the named response
(tenant-scoped) to its start or to the most recent cached summary's boundary (:func:`chalicelib.responses.store.chain`).
The result is a :class:`~chalicelib.responses.turns.Chain` (re-exported here), the shape history building takes.
"""

from __future__ import annotations

import psycopg

from chalicelib.responses import store
from chalicelib.responses.turns import Chain

__all__ = ["Chain", "load"]


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
