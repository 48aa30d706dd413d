"""Ingestion: bytes → text (parse) → chunks (chunk) → vectors (embed) → rows (store).

Public modules (``__all__``; import them by name — the parsers are heavy, so this file imports nothing):
:mod:`engine` (the one state machine taking an attached file to ``completed``), :mod:`attach` (checking and
attaching files from API requests), :mod:`pipeline` (ingesting a local file by name), :mod:`parse` (file bytes →
:class:`~chalicelib.ingest.document.ParsedDocument`), :mod:`chunk` (token-bounded chunking and the chunking
strategy), :mod:`document` (the parsed document) and :mod:`messages` (the ``ingest.file`` / ``embed.batch``
messages).
"""

__all__ = ["attach", "chunk", "document", "engine", "messages", "parse", "pipeline"]
