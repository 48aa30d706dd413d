"""Lazily built, cached dependencies shared by the CLI, the HTTP routes and the event handlers.

Nothing here runs at import; tests replace a dependency with ``set_embedder`` or by passing settings.
"""

from __future__ import annotations

import functools

import psycopg

from chalicelib.config import Settings, settings
from chalicelib.embed.base import Embedder

_embedder_override: Embedder | None = None


@functools.cache
def _embedder_for(config: Settings) -> Embedder:
    from chalicelib.embed import build_embedder

    return build_embedder(config)


def embedder(config: Settings | None = None) -> Embedder:
    """The configured embedder (built once per settings object; the local model loads on first use)."""
    if _embedder_override is not None:
        return _embedder_override
    return _embedder_for(config or settings())


def set_embedder(value: Embedder | None) -> None:
    """Replace the embedder for this process (tests); ``None`` restores the configured one."""
    global _embedder_override
    _embedder_override = value


def connect(config: Settings | None = None) -> psycopg.Connection:
    """A new autocommit connection to the configured (or embedded) database, schema migrated."""
    from chalicelib.store.db import connect as db_connect

    return db_connect(config or settings())
