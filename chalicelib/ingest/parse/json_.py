"""JSON (``.json``, also JSON Lines content): flattened to readable ``path: value`` lines."""

from __future__ import annotations

import json
from typing import Any

from chalicelib.errors import DocumentError
from chalicelib.ingest.document import ParsedDocument
from chalicelib.ingest.parse.limits import CharBudget, Deadline, ParseLimits, display_name, setting_of
from chalicelib.ingest.parse.normalize import clean_text, join_blocks
from chalicelib.ingest.parse.text import decode_text

_CHECK_EVERY_NODES = 10_000


def parse_json(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument:
    """Parse a JSON document (or JSON Lines) and flatten it into text.

    Every scalar becomes one line ``"path: value"`` where ``path`` joins object keys with ``.`` and array indexes
    as ``[i]`` (e.g. ``"users[0].name: Ada"``); a top-level scalar is rendered bare. Each top-level member (object
    key or array element, or JSON Lines record) forms its own block, blocks separated by blank lines.

    Raises ``DocumentError`` (``invalid_file``) if the text is not JSON, nests deeper than ``limits.max_nesting``,
    or exceeds the time/character limits.
    """
    name = display_name(filename)
    text = decode_text(data, filename)
    values = _load(text, name)
    deadline = Deadline(limits.timeout_s, filename, limits.wall_timeout_s)
    budget = CharBudget(limits.max_chars, filename)
    blocks: list[str] = []
    for value in values:
        if isinstance(value, dict) and len(values) == 1:
            members = [(_key(k), v) for k, v in value.items()]
        elif isinstance(value, list) and len(values) == 1:
            members = [(f"[{i}]", v) for i, v in enumerate(value)]
        else:
            members = [("", value)]
        for path, member in members:
            lines = _flatten(path, member, limits.max_nesting, name, deadline, budget)
            blocks.append(clean_text("\n".join(lines)))
    return ParsedDocument(text=join_blocks(blocks), parser="json")


def _load(text: str, name: str) -> list[Any]:
    """The document's top-level values: one for JSON, one per line for JSON Lines."""
    try:
        return [json.loads(text)] if text.strip() else []
    except RecursionError as exc:
        raise DocumentError(f"{name} nests JSON too deeply to read") from exc
    except ValueError as exc:  # JSONDecodeError, or an integer over sys.get_int_max_str_digits() digits
        first_error = exc
    try:  # JSON Lines: every non-blank line a JSON value
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (ValueError, RecursionError):
        records = []
    if len(records) > 1:
        return records
    if isinstance(first_error, json.JSONDecodeError):
        detail = f"{first_error.msg} at line {first_error.lineno} column {first_error.colno}"
    else:
        detail = str(first_error)
    raise DocumentError(f"{name} is not valid JSON: {detail}") from first_error


def _key(key: str) -> str:
    return key if key and all(ch.isalnum() or ch in "_-" for ch in key) else json.dumps(key, ensure_ascii=False)


def _flatten(path: str, value: Any, max_depth: int, name: str, deadline: Deadline, budget: CharBudget) -> list[str]:
    """Depth-first, iterative (no recursion), in document order; returns the ``path: value`` lines."""
    lines: list[str] = []
    stack: list[tuple[str, Any, int]] = [(path, value, 1)]
    visited = 0
    while stack:
        path, value, depth = stack.pop()
        visited += 1
        if visited % _CHECK_EVERY_NODES == 0:
            deadline.check()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise DocumentError(f"{name} nests JSON deeper than {max_depth} levels ({setting_of('max_nesting')})")
            if isinstance(value, dict):
                children = [(f"{path}.{_key(k)}" if path else _key(k), v) for k, v in value.items()]
            else:
                children = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
            stack.extend((p, v, depth + 1) for p, v in reversed(children))
            continue
        rendered = _scalar(value)
        if rendered == "":
            continue
        line = f"{path}: {rendered}" if path else rendered
        budget.add(len(line) + 1)
        lines.append(line)
    return lines


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    return str(value).strip()
