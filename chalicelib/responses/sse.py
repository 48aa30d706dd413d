"""Server-Sent Events encoding of Responses stream events (OPENAI-COMPAT.md §4 "Streaming")."""

from __future__ import annotations

import json
from typing import Any


def encode(event: dict[str, Any]) -> bytes:
    """One event on the wire: ``event: <type>\\ndata: <json>\\n\\n`` (UTF-8; the JSON is one line).

    The SDK dispatches on ``data.type``; the ``event:`` line mirrors it for other SSE clients.
    """
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()
