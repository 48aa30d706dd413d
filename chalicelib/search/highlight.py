"""Where a query's words occur in a text, as the keyword leg sees them: the spans of the text whose Postgres
full-text lexeme (the ``english`` configuration's Snowball stem, stop words left out) is one of the query's — so
"ranking" in a text is marked for a query about "ranked", and "the" never is. What the console marks in a search
result's text (:func:`chalicelib.api.objects.search_page`'s ``score_details.matches``).

Postgres' ``ts_headline`` does the work with ``HighlightAll`` (the whole text, every matching word between two
markers no stored text holds); the markers are then turned into character offsets and the text without them must
be the text given, else no span is reported for it (never a wrong one).
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

__all__ = ["matches"]

# Markers around each matching word (control characters chunk text does not hold: parsed text is normalised,
# chalicelib.ingest.parse.normalize). A text holding one anyway gets no spans (the check below).
_START, _STOP = "\x02", "\x03"
# Any of the query's lexemes (plainto_tsquery's conjunction made a disjunction); one headline per text, in order.
_HEADLINES = f"""
WITH q AS (SELECT replace(plainto_tsquery('english', %(query)s)::text, '&', '|') AS text)
SELECT CASE WHEN q.text = '' THEN NULL
            ELSE ts_headline('english', t.text, q.text::tsquery,
                             'HighlightAll=true, StartSel={_START}, StopSel={_STOP}') END
FROM unnest(%(texts)s::text[]) WITH ORDINALITY AS t(text, position), q ORDER BY t.position"""


def matches(conn: psycopg.Connection, queries: Sequence[str], texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """For each of ``texts``, the ``(start, end)`` character offsets (Unicode code points, end exclusive, in text
    order, not overlapping) of its words matching any of ``queries``' lexemes; ``[]`` for a text with none (or a
    query with no lexeme: only stop words or punctuation). One statement per query."""
    spans: list[set[tuple[int, int]]] = [set() for _ in texts]
    if not texts:
        return []
    for query in queries:
        try:
            with conn.transaction():
                rows = conn.execute(_HEADLINES, {"query": query, "texts": list(texts)}).fetchall()
        except psycopg.errors.SyntaxError:  # a lexeme plainto_tsquery quoted that the disjunction broke
            continue
        for found, text, (marked,) in zip(spans, texts, rows, strict=True):
            if marked is not None:
                found.update(_spans(marked, text))
    return [sorted(found) for found in spans]


def _spans(marked: str, text: str) -> list[tuple[int, int]]:
    """The marked words' offsets in ``text``, or ``[]`` when ``marked`` without its markers is not ``text``."""
    out: list[tuple[int, int]] = []
    plain: list[str] = []
    position = 0
    start: int | None = None
    for char in marked:
        if char == _START:
            start = position
        elif char == _STOP and start is not None:
            if position > start:
                out.append((start, position))
            start = None
        else:
            plain.append(char)
            position += 1
    return out if "".join(plain) == text else []
