"""Responses stream events (SDK ``types/responses/response_*_event.py``), numbered in order.

Every event is a dict with ``type`` and ``sequence_number`` (0, 1, 2, … within one response). Items and parts
embedded in events are snapshots (copies), so later changes to the response do not alter events already sent.
"""

from __future__ import annotations

import copy
from typing import Any


class Emitter:
    """Builds the events of one response, numbering them."""

    def __init__(self) -> None:
        self._sequence = 0

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        """``{"type": kind, **fields, "sequence_number": n}`` with the next number (fields deep-copied)."""
        event = {"type": kind, **copy.deepcopy(fields), "sequence_number": self._sequence}
        self._sequence += 1
        return event

    # ---- lifecycle ----
    def lifecycle(self, kind: str, response: dict[str, Any]) -> dict[str, Any]:
        """``response.created | in_progress | completed | failed | incomplete`` carrying the Response object."""
        return self.event(f"response.{kind}", response=response)

    # ---- output items ----
    def item_added(self, index: int, item: dict[str, Any]) -> dict[str, Any]:
        """``response.output_item.added``."""
        return self.event("response.output_item.added", output_index=index, item=item)

    def item_done(self, index: int, item: dict[str, Any]) -> dict[str, Any]:
        """``response.output_item.done``."""
        return self.event("response.output_item.done", output_index=index, item=item)

    # ---- file_search ----
    def file_search(self, phase: str, index: int, item_id: str) -> dict[str, Any]:
        """``response.file_search_call.in_progress | searching | completed``."""
        return self.event(f"response.file_search_call.{phase}", output_index=index, item_id=item_id)

    # ---- message text ----
    def part_added(self, index: int, item_id: str, part: dict[str, Any]) -> dict[str, Any]:
        """``response.content_part.added`` (content index 0: one text part per message)."""
        return self.event("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
                          part=part)

    def part_done(self, index: int, item_id: str, part: dict[str, Any]) -> dict[str, Any]:
        """``response.content_part.done``."""
        return self.event("response.content_part.done", item_id=item_id, output_index=index, content_index=0,
                          part=part)

    def text_delta(self, index: int, item_id: str, delta: str) -> dict[str, Any]:
        """``response.output_text.delta``."""
        return self.event("response.output_text.delta", item_id=item_id, output_index=index, content_index=0,
                          delta=delta, logprobs=[])

    def annotation(self, index: int, item_id: str, annotation_index: int,
                   annotation: dict[str, Any]) -> dict[str, Any]:
        """``response.output_text.annotation.added``."""
        return self.event("response.output_text.annotation.added", item_id=item_id, output_index=index,
                          content_index=0, annotation_index=annotation_index, annotation=annotation)

    def text_done(self, index: int, item_id: str, text: str) -> dict[str, Any]:
        """``response.output_text.done``."""
        return self.event("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                          text=text, logprobs=[])

    # ---- function calls ----
    def arguments_delta(self, index: int, item_id: str, delta: str) -> dict[str, Any]:
        """``response.function_call_arguments.delta``."""
        return self.event("response.function_call_arguments.delta", item_id=item_id, output_index=index,
                          delta=delta)

    def arguments_done(self, index: int, item_id: str, name: str, arguments: str) -> dict[str, Any]:
        """``response.function_call_arguments.done``."""
        return self.event("response.function_call_arguments.done", item_id=item_id, output_index=index,
                          name=name, arguments=arguments)

    # ---- mcp ----
    def mcp_list_tools(self, phase: str, index: int, item_id: str) -> dict[str, Any]:
        """``response.mcp_list_tools.in_progress | completed | failed``."""
        return self.event(f"response.mcp_list_tools.{phase}", output_index=index, item_id=item_id)

    def mcp_call(self, phase: str, index: int, item_id: str) -> dict[str, Any]:
        """``response.mcp_call.in_progress | completed | failed``."""
        return self.event(f"response.mcp_call.{phase}", output_index=index, item_id=item_id)

    def mcp_arguments_delta(self, index: int, item_id: str, delta: str) -> dict[str, Any]:
        """``response.mcp_call_arguments.delta``."""
        return self.event("response.mcp_call_arguments.delta", item_id=item_id, output_index=index, delta=delta)

    def mcp_arguments_done(self, index: int, item_id: str, arguments: str) -> dict[str, Any]:
        """``response.mcp_call_arguments.done``."""
        return self.event("response.mcp_call_arguments.done", item_id=item_id, output_index=index,
                          arguments=arguments)
