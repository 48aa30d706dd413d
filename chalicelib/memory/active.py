"""Which memories count: the one definition of an *active* memory, as SQL, used by every reader and job (recall,
lists, counts, duplicate checks, consolidation, archiving, quotas, the persona).

A memory is

- **current** — the open version of its fact: no update replaced it (``superseded_by``) and no contradiction or
  update closed it (``valid_to``);
- **live** at an instant — not merged into another (``consolidated_into``), not archived (``archived_at``) and not
  expired then (``expires_at``);
- **active** — current and live now: what recall returns and what the lifecycle jobs work on;
- **valid at** an instant *t* — its validity interval holds *t* (``valid_from ≤ t < valid_to``): with ``live`` at
  *t*, what a search ``as_of`` *t* sees (time travel over the validity intervals).

Each function returns an SQL boolean over the ``memories`` columns; ``alias`` qualifies them (``"m"`` →
``m.valid_to``) and ``at`` is an SQL expression for the instant (``now()`` by default, or a placeholder such as
``%(as_of)s``).
"""

from __future__ import annotations

__all__ = ["ACTIVE", "active", "current", "live", "valid_at"]

_CURRENT = "{m}valid_to IS NULL AND {m}superseded_by IS NULL"
_LIVE = "{m}consolidated_into IS NULL AND {m}archived_at IS NULL AND ({m}expires_at IS NULL OR {m}expires_at > {at})"
_VALID_AT = "{m}valid_from <= {at} AND ({m}valid_to IS NULL OR {m}valid_to > {at})"


def _prefix(alias: str) -> str:
    return f"{alias}." if alias else ""


def current(alias: str = "") -> str:
    """The memory is the open version of its fact (not replaced, not closed)."""
    return _CURRENT.format(m=_prefix(alias))


def live(alias: str = "", at: str = "now()") -> str:
    """The memory is not merged, archived or expired at ``at``."""
    return _LIVE.format(m=_prefix(alias), at=at)


def active(alias: str = "") -> str:
    """Current and live now: what recall, lists and the lifecycle jobs see."""
    return f"{current(alias)} AND {live(alias)}"


def valid_at(alias: str = "", at: str = "now()") -> str:
    """The memory's validity interval holds ``at`` (``valid_from ≤ at < valid_to``)."""
    return _VALID_AT.format(m=_prefix(alias), at=at)


ACTIVE = active()
