"""What the CLI commands do, apart from printing: file discovery, store resolution, ingest, search, stats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from chalicelib import deps
from chalicelib.config import settings
from chalicelib.errors import NotFoundError
from chalicelib.ingest.pipeline import IngestResult, ingest_bytes
from chalicelib.search.service import MAX_RESULTS_API, RankingOptions, SearchHit
from chalicelib.search.service import search as run_search
from chalicelib.store import attachments, vector_stores
from chalicelib.store import files as file_rows

DEMO_QUERIES = (
    "why do filtered vector searches return too few results?",
    "inverse document frequency",
    "what happened with the password-protected PDF?",
)
_MODES = {"hybrid": (1.0, 1.0), "vector": (1.0, 0.0), "keyword": (0.0, 1.0)}
_SNIPPET_CHARS = 240


def collect_files(paths: list[Path]) -> list[tuple[Path, str]]:
    """``(path, name)`` for every file under ``paths`` (folders recursively, hidden files skipped), sorted.
    ``name`` is the path relative to the folder given (the file's name in the store)."""
    found: list[tuple[Path, str]] = []
    for root in paths:
        if root.is_file():
            found.append((root, root.name))
            continue
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if path.is_file() and not any(part.startswith(".") for part in rel.parts):
                found.append((path, rel.as_posix()))
    return found


def open_store(conn: psycopg.Connection, name: str) -> vector_stores.VectorStore:
    """The tenant's store named (or with id) ``name``, created for the configured embedder if missing."""
    embedder = deps.embedder()
    config = settings()
    return vector_stores.find_or_create(conn, config.tenant, name, model=embedder.model, dim=embedder.dimension,
                                        backend=config.vector_backend)


def _existing_store(conn: psycopg.Connection, name: str, *, shared: bool = False) -> vector_stores.VectorStore:
    store = vector_stores.find(conn, settings().tenant, name, shared=shared)
    if store is None:
        raise NotFoundError(f"No vector store named or with id {name!r}. Run `engram stores` to list them.",
                            param="store")
    return store


def ingest_path(conn: psycopg.Connection, store: vector_stores.VectorStore, path: Path, name: str,
                strategy: dict[str, Any] | None, *, force: bool = False) -> IngestResult:
    """Ingest one local file (unsupported extensions are recorded as failed ``unsupported_file`` too)."""
    return ingest_bytes(conn, settings(), settings().tenant, store, filename=name, data=path.read_bytes(),
                        embedder=deps.embedder(), chunking_strategy=strategy, skip_unchanged=not force)


def build_indexes(conn: psycopg.Connection) -> str | None:
    """Build what the backends that keep their own copy were written since their last build (after a bulk
    ingest: :func:`chalicelib.search.backends.sync.settle`); returns a note for people when this process could not
    (the embedded engine held by ``engram serve``: its ``sync_vector_index`` job builds it), else None."""
    from chalicelib.errors import EngramError
    from chalicelib.search.backends import sync

    try:
        sync.settle(conn, settings())
    except EngramError as error:
        return (f"note: the vector index was not built here ({error.message}); the running stack's "
                "sync_vector_index job builds it (every 5 minutes, or `engram jobs run sync_vector_index` there)")
    return None


def search(conn: psycopg.Connection, store: str, query: str, *, k: int, filters: Any, mode: str,
           threshold: float = 0.0) -> list[SearchHit]:
    """Hybrid (or vector-only / keyword-only) search of one store — the tenant's (by name or id) or a shared one (by
    id); only hits whose relevance reaches ``threshold``.

    Raises:
        InvalidRequestError: unknown ``mode``, ``threshold`` outside [0, 1], or what the search itself rejects.
    """
    from chalicelib.errors import InvalidRequestError

    if mode not in _MODES:
        raise InvalidRequestError(f"mode must be one of {', '.join(_MODES)}.", param="mode")
    if not 0.0 <= threshold <= 1.0:
        raise InvalidRequestError("threshold must be between 0 and 1.", param="threshold")
    embedding_weight, text_weight = _MODES[mode]
    target = _existing_store(conn, store, shared=True)
    return run_search(conn, settings().tenant, [target], query, embedder=deps.embedder(), settings=settings(),
                      limit=k, filters=filters, max_results=MAX_RESULTS_API,
                      ranking=RankingOptions(score_threshold=threshold, embedding_weight=embedding_weight,
                                             text_weight=text_weight))


def stats(conn: psycopg.Connection) -> dict[str, Any]:
    """``{"tenant", "stores": [{id, name, embedding_model, embedding_dim, backend, files: {status: n, total}, chunks,
    usage_bytes, created_at, shared, shared_at, shared_by, index: {indexed, points, pending_files, detail}}]}``
    (times in Unix seconds; ``index``: the state of the store's candidates in its backend,
    :func:`chalicelib.search.backends.sync.index_state`)."""
    from chalicelib.search.backends import sync

    tenant = settings().tenant
    out = []
    for store in vector_stores.list_all(conn, tenant):
        counts = {"in_progress": 0, "completed": 0, "failed": 0, "cancelled": 0}
        for row in attachments.list_all(conn, tenant, store.id):
            counts[row.status] += 1
        counts["total"] = sum(counts.values())
        out.append({"id": store.id, "name": store.name, "embedding_model": store.embedding_model,
                    "embedding_dim": store.embedding_dim, "backend": store.backend, "files": counts,
                    "chunks": store.chunk_count, "usage_bytes": store.usage_bytes,
                    "created_at": int(store.created_at.timestamp()), **sharing(store),
                    "index": {k: v for k, v in sync.index_state(conn, settings(), tenant, store.id).items()
                              if k != "backend"}})
    return {"tenant": tenant, "stores": out}


def index_label(index: dict[str, Any]) -> str:
    """A store's index state in a few words: ``indexed``, ``not indexed`` or ``unknown``, then the points and the
    files still queued for the backend (``stats()``'s ``index``)."""
    word = {True: "indexed", False: "[yellow]not indexed[/]", None: "unknown"}[index["indexed"]]
    points = "?" if index["points"] is None else f"{index['points']:,}"
    pending = f", {index['pending_files']} files pending" if index["pending_files"] else ""
    return f"{word} ({points} points{pending})"


def sharing(store: vector_stores.VectorStore) -> dict[str, Any]:
    """``{"shared": bool, "shared_at": Unix seconds or None, "shared_by": str or None}`` of a store."""
    return {"shared": store.shared, "shared_by": store.shared_by,
            "shared_at": int(store.shared_at.timestamp()) if store.shared_at is not None else None}


def delete(conn: psycopg.Connection, store: str, file: str | None) -> None:
    """Delete a store, or one file (by name or id) from it and the file itself.

    Raises:
        NotFoundError: no such store or file.
    """
    target = _existing_store(conn, store)
    tenant = settings().tenant
    if file is None:
        vector_stores.delete(conn, tenant, target.id)
        return
    match = next((f for f in attachments.list_all(conn, tenant, target.id) if file in (f.file_id, f.filename)), None)
    if match is None:
        raise NotFoundError(f"No file {file!r} in vector store {target.id}.", param="file")
    file_rows.delete_file(conn, tenant, match.file_id)


def result_dict(r: IngestResult) -> dict[str, Any]:
    """JSON shape of an ingest result."""
    return {"file_id": r.file_id, "filename": r.filename, "status": r.status, "chunks": r.chunk_count,
            "embedded": r.embedded, "cached": r.cached, "last_error": r.error}


def hit_dict(h: SearchHit) -> dict[str, Any]:
    """JSON shape of a search hit (``filename``, ``score``, ``text`` plus its position)."""
    return {"filename": h.filename, "score": h.score, "text": h.text, "file_id": h.file_id,
            "vector_store_id": h.vector_store_id, "chunk_index": h.chunk_index, "page_start": h.page_start,
            "page_end": h.page_end, "char_start": h.char_start, "char_end": h.char_end, "attributes": h.attributes}


def position(h: SearchHit) -> str:
    """Human position: chunk number and pages (``"chunk 3, p. 2-3"``)."""
    pages = "" if h.page_start is None else (f", p. {h.page_start}" if h.page_start == h.page_end
                                               else f", p. {h.page_start}-{h.page_end}")
    return f"chunk {h.chunk_index}{pages}"


def snippet(text: str) -> str:
    """The first ~240 characters of ``text`` on one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= _SNIPPET_CHARS else flat[:_SNIPPET_CHARS - 1] + "…"
