"""Citations: the marker convention the model writes, and its conversion into ``file_citation`` annotations.

Convention (after OGX's ``<|file-XXXX|>`` markers, OPENAI-COMPAT.md §7 gotcha 4): each search result the model
sees is labelled with ``<|file-…|>`` (:func:`marker`), and the system prompt (:data:`GUIDE`) asks the model to write
that marker right after a statement the source supports. Markers are removed from the text the client sees; each
one whose file was among the results becomes ``{"type": "file_citation", "file_id", "filename", "index"}`` with
``index`` the character offset in the cleaned text where the marker stood. Markers naming files the model never
saw are removed without an annotation. Whitespace just before a marker goes with it ("Paris <|file-1|>." →
"Paris."). :class:`CitationStripper` does this incrementally on streamed text, holding back only what could still
turn out to be a marker, so streamed deltas concatenate to exactly the final text.
"""

from __future__ import annotations

import re
from typing import Any

from chalicelib.wire import FileSearchResult

_FILE_ID = r"file-[A-Za-z0-9_-]{1,64}"
MARKER = re.compile(r"<\|(" + _FILE_ID + r")\|>")
# A suffix that may still grow into a marker: "<", "<|", "<|fi", "<|file-abc", "<|file-abc|".
_PARTIAL = re.compile(r"<(?:\|(?:f(?:i(?:l(?:e(?:-[A-Za-z0-9_-]{0,64}\|?)?)?)?)?)?)?$")

GUIDE = ("You can search the user's documents with the file_search tool. Each search result is labelled with a "
         "source marker such as <|file-abc123|>. When a statement in your answer relies on a result, write that "
         "result's marker, exactly as given, right after the statement. Never invent markers; cite only sources "
         "you used.")


def marker(file_id: str) -> str:
    """The marker that labels (and cites) ``file_id``: ``<|file-…|>``."""
    return f"<|{file_id}|>"


class CitationStripper:
    """Turns the model's raw text, fed in pieces, into clean text pieces and annotations.

    ``sources`` maps the citable file ids to their filenames. :meth:`feed` and :meth:`close` return a list of
    ``("delta", str)`` and ``("annotation", dict)`` events in order; afterwards :attr:`text` is the whole clean
    text and :attr:`annotations` every annotation.
    """

    def __init__(self, sources: dict[str, str]) -> None:
        self.sources = sources
        self.text = ""
        self.annotations: list[dict[str, Any]] = []
        self._pending = ""

    def feed(self, chunk: str) -> list[tuple[str, Any]]:
        """Consume a piece of raw model text."""
        events: list[tuple[str, Any]] = []
        buf = self._pending + chunk
        while True:
            found = MARKER.search(buf)
            if found is None:
                break
            self._emit(buf[:found.start()].rstrip(), events)
            self._cite(found.group(1), events)
            buf = buf[found.end():]
        partial = _PARTIAL.search(buf)
        cut = partial.start() if partial else len(buf)
        head = buf[:cut]
        kept = head.rstrip()
        self._emit(kept, events)
        self._pending = head[len(kept):] + buf[cut:]
        return events

    def close(self) -> list[tuple[str, Any]]:
        """The end of the text: whatever was held back is plain text after all."""
        events: list[tuple[str, Any]] = []
        self._emit(self._pending, events)
        self._pending = ""
        return events

    def _emit(self, text: str, events: list[tuple[str, Any]]) -> None:
        if text:
            self.text += text
            events.append(("delta", text))

    def _cite(self, file_id: str, events: list[tuple[str, Any]]) -> None:
        filename = self.sources.get(file_id)
        if filename is None:
            return
        annotation = {"type": "file_citation", "file_id": file_id, "filename": filename, "index": len(self.text)}
        if annotation in self.annotations:
            return
        self.annotations.append(annotation)
        events.append(("annotation", annotation))


def strip(text: str, sources: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    """``(clean text, annotations)`` for a whole text at once (same result as feeding it in pieces)."""
    stripper = CitationStripper(sources)
    stripper.feed(text)
    stripper.close()
    return stripper.text, stripper.annotations


def format_results(queries: list[str], results: list[FileSearchResult] | None) -> str:
    """The tool message the model reads: each result's marker, filename, score and text (or "no results"; or, when
    ``results`` is None — a search that failed or could not run —, that it failed)."""
    header = "Search results for: " + "; ".join(queries)
    if results is None:
        return header + ("\n(The search failed: the user's documents could not be searched. Answer without them, "
                         "and say that the search failed.)")
    if not results:
        return header + "\nNo results found in the user's documents."
    blocks = [header]
    for result in results:
        blocks.append(f"Source {marker(result.get('file_id') or '')} ({result.get('filename')}, "
                      f"score {float(result.get('score') or 0.0):.3f}):\n{result.get('text') or ''}")
    return "\n\n".join(blocks)


def sources(results: list[FileSearchResult] | None) -> dict[str, str]:
    """``{file_id: filename}`` of search results (what the model may cite)."""
    return {file_id: r.get("filename") or "" for r in results or [] if (file_id := r.get("file_id"))}
