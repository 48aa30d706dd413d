"""Lazily built, cached dependencies shared by the CLI, the HTTP routes and the event handlers.

Nothing here runs at import; tests replace a dependency with ``set_embedder`` or by passing settings.
"""

from __future__ import annotations

import functools

import psycopg

from chalicelib.config import Settings, settings
from chalicelib.embed.base import Embedder

_embedder_override: Embedder | None = None
_settings_override: Settings | None = None


def current_settings() -> Settings:
    """The settings this process runs with: the override set by :func:`set_settings`, else the environment's."""
    return _settings_override if _settings_override is not None else settings()


def set_settings(value: Settings | None) -> None:
    """Replace the process's settings (tests, ``engram serve``); ``None`` restores the environment's."""
    global _settings_override
    _settings_override = value


@functools.cache
def _embedder_for(config: Settings) -> Embedder:
    from chalicelib.embed import build_embedder

    return build_embedder(config)


def embedder(config: Settings | None = None) -> Embedder:
    """The configured embedder (built once per settings object; the local model loads on first use)."""
    if _embedder_override is not None:
        return _embedder_override
    return _embedder_for(config or current_settings())


def set_embedder(value: Embedder | None) -> None:
    """Replace the embedder for this process (tests); ``None`` restores the configured one."""
    global _embedder_override
    _embedder_override = value


def connect(config: Settings | None = None) -> psycopg.Connection:
    """A new autocommit connection to the configured (or embedded) database, schema migrated."""
    from chalicelib.store.db import connect as db_connect

    return db_connect(config or current_settings())
