"""The composition root: every dependency a process shares is built here, lazily, once, and can be replaced by
tests — the settings, the embedder, the chat backend for each model, the dispatcher, the blob store, the Qdrant
transport and database connections. (AWS clients are cached one level down, in :mod:`chalicelib.aws`.)

Nothing here runs at import. The edges — the HTTP routes, the queue consumers, the scheduled jobs, the CLI — ask
for what they need; domain code receives it or asks here.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

from chalicelib.config import Settings, settings

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

    from chalicelib.chat.base import ChatBackend
    from chalicelib.dispatch.port import Dispatcher
    from chalicelib.embed.base import Embedder
    from chalicelib.qdrant import QdrantTransport
    from chalicelib.store.blobs import BlobStore

__all__ = [
    "blob_store",
    "chat_backend",
    "connect",
    "current_settings",
    "dispatcher",
    "embedder",
    "qdrant",
    "reset",
    "set_dispatcher",
    "set_embedder",
    "set_qdrant",
    "set_settings",
]

_lock = threading.Lock()
_overrides: dict[str, Any] = {}
_chat_backends: dict[tuple[Any, ...], Any] = {}
_dispatchers: dict[Settings, Any] = {}


def current_settings() -> Settings:
    """The settings this process runs with: the override set by :func:`set_settings`, else the environment's."""
    override = _overrides.get("settings")
    return override if override is not None else settings()


def set_settings(value: Settings | None) -> None:
    """Replace the process's settings (tests, ``engram serve``); ``None`` restores the environment's."""
    _set("settings", value)


@functools.cache
def _embedder_for(config: Settings) -> Embedder:
    from chalicelib.embed import build_embedder

    return build_embedder(config)


def embedder(config: Settings | None = None) -> Embedder:
    """The configured embedder (built once per settings object; a local model loads on first use).

    Raises:
        ConfigurationError: the embedding settings cannot be honoured.
    """
    override = _overrides.get("embedder")
    if override is not None:
        return override
    return _embedder_for(config or current_settings())


def set_embedder(value: Embedder | None) -> None:
    """Replace the embedder for this process (tests); ``None`` restores the configured one."""
    _set("embedder", value)


def chat_backend(model: str, config: Settings | None = None) -> ChatBackend:
    """The chat backend that answers ``model`` (:mod:`chalicelib.chat.routing`), built once per process and
    configuration and shared across threads.

    Raises:
        InvalidRequestError: (400, param ``model``, code ``model_not_available``) no backend is configured for it.
        ConfigurationError: a malformed ``ENGRAM_CHAT_MODEL_ROUTES``.
    """
    from chalicelib.chat import routing

    config = config or current_settings()
    key = routing.backend_key(config, model)
    with _lock:
        backend = _chat_backends.get(key)
        if backend is None:
            backend = _chat_backends[key] = routing.build_backend(config, key[0])
    return backend


def dispatcher(config: Settings | None = None) -> Dispatcher:
    """Where messages go: SQS when the ingestion queue is configured (deployed, or the local moto stack), else
    background threads of this process (:class:`~chalicelib.dispatch.local.LocalDispatcher`)."""
    override = _overrides.get("dispatcher")
    if override is not None:
        return override
    config = config or current_settings()
    with _lock:
        built = _dispatchers.get(config)
        if built is None:
            if config.ingest_queue:
                from chalicelib.dispatch.sqs import SqsDispatcher

                built = SqsDispatcher(config)
            else:
                from chalicelib.dispatch.local import LocalDispatcher

                built = LocalDispatcher(config)
            _dispatchers[config] = built
    return built


def set_dispatcher(value: Dispatcher | None) -> None:
    """Replace the dispatcher for this process (tests); ``None`` restores the configured one."""
    _set("dispatcher", value)


@functools.cache
def _blob_store_for(config: Settings) -> BlobStore:
    from chalicelib.store.blobs import build_blob_store

    return build_blob_store(config)


def blob_store(config: Settings | None = None) -> BlobStore:
    """Where file bytes and upload parts live: S3 when ``ENGRAM_BUCKET`` is set, else a folder under the data
    directory (built once per settings object)."""
    return _blob_store_for(config or current_settings())


@functools.cache
def _qdrant_for(url: str | None, root: str, config: Settings) -> QdrantTransport:
    from chalicelib.qdrant import build_transport

    return build_transport(config)


def qdrant(config: Settings | None = None) -> QdrantTransport:
    """The Qdrant transport (:func:`chalicelib.qdrant.build_transport`): HTTP to ``ENGRAM_QDRANT_URL``, else the
    embedded engine under the data folder; one per server or folder in the process."""
    override = _overrides.get("qdrant")
    if override is not None:
        return override
    config = config or current_settings()
    return _qdrant_for(config.qdrant_url, str(config.data_dir), config)


def set_qdrant(value: QdrantTransport | None) -> None:
    """Replace the Qdrant transport for this process (tests); ``None`` restores the configured one."""
    _set("qdrant", value)


def connect(config: Settings | None = None) -> psycopg.Connection:
    """A new autocommit connection (as the owner) to the configured (or embedded) database, schema migrated.

    Raises:
        psycopg.OperationalError: the database cannot be reached.
    """
    from chalicelib.store.db import connect as db_connect

    return db_connect(config or current_settings())


def reset() -> None:
    """Forget every built dependency and override (tests switching configurations); background dispatchers are
    shut down after finishing what they hold."""
    with _lock:
        _overrides.clear()
        _chat_backends.clear()
        dispatchers = list(_dispatchers.values())
        _dispatchers.clear()
    for built in dispatchers:
        shutdown = getattr(built, "shutdown", None)
        if shutdown is not None:
            shutdown()
    _embedder_for.cache_clear()
    _blob_store_for.cache_clear()
    _qdrant_for.cache_clear()


def _set(name: str, value: Any) -> None:
    with _lock:
        if value is None:
            _overrides.pop(name, None)
        else:
            _overrides[name] = value
