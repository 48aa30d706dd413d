"""Functions and classes named by dotted path (``package.module:attribute``): how Engram's tables (messages,
scheduled jobs) refer to code without importing it — nothing is imported until it is first needed (Lambda cold
starts stay cheap) and no module registers itself at import."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["resolve"]


def resolve(path: str) -> Any:
    """The object ``module:attribute`` names, importing its module now.

    Raises:
        ImportError / AttributeError: the path names nothing (a broken table; tests resolve every row).
        ValueError: the path has no ``:``.
    """
    module, sep, attribute = path.partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"not a 'module:attribute' path: {path!r}")
    return getattr(importlib.import_module(module), attribute)
