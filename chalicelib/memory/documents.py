"""A document as memories (seed 004's ``/vdoc``): the file is parsed and chunked with the ingestion code
(:mod:`chalicelib.ingest.parse`, :mod:`chalicelib.ingest.chunk`) and each chunk stored verbatim as a ``knowledge``
memory (``source_type`` ``asset_derived``) whose metadata links it to its siblings: ``source_file``,
``chunk_index`` (0-based) and ``total_chunks``.

Chunks are smaller than a vector store's: :data:`CHUNK_TOKENS` with :data:`OVERLAP_TOKENS` of overlap, seed 004's
"Document Chunking" defaults (1,000 characters with 100 of overlap) in tokens at ~4 characters per token.
"""

from __future__ import annotations

import psycopg

from chalicelib.config import Settings
from chalicelib.embed.base import Embedder
from chalicelib.ingest.chunk import ChunkingStrategy, chunk_document
from chalicelib.ingest.parse import parse_document
from chalicelib.memory import write
from chalicelib.memory.model import MemoryScope

__all__ = ["CHUNK_TOKENS", "OVERLAP_TOKENS", "add_document"]

CHUNK_TOKENS = 250
OVERLAP_TOKENS = 25


def add_document(conn: psycopg.Connection, settings: Settings, tenant_id: str, scope: MemoryScope, *,
                 filename: str, data: bytes, embedder: Embedder, pinned: bool = False) -> write.AddResult:
    """Store the document's chunks as memories of ``scope`` (exact duplicates of stored memories are NOOP).

    Raises:
        DocumentError / UnsupportedFileError: the file cannot be parsed (nothing written).
        UpstreamError: embedding failed (nothing written).
    """
    document = parse_document(data, filename)
    strategy = ChunkingStrategy(max_chunk_size_tokens=CHUNK_TOKENS, chunk_overlap_tokens=OVERLAP_TOKENS)
    chunks = [c for c in chunk_document(document, strategy, embedder.tokenizer) if c.text.strip()]
    messages = tuple(write.InputMessage("user", c.text, metadata={
        "source_file": filename, "chunk_index": i, "total_chunks": len(chunks)}) for i, c in enumerate(chunks))
    request = write.AddRequest(messages=messages, scope=scope, infer=False, memory_type="knowledge",
                               pinned=pinned, source_kind="file", source_id=filename,
                               source_type="asset_derived")
    if not messages:
        return write.AddResult([])
    return write.add(conn, settings, tenant_id, request, embedder=embedder, backend=None, model=None)
