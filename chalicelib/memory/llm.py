"""Which model memory uses, and its backend: one decision for every path that asks a model about memories — an
inferring add (inline, in the memory queue's job, or after a response), consolidation, episodes and the persona.

The memory model is ``ENGRAM_MEMORY_MODEL``, else ``ENGRAM_CHAT_MODEL`` (a smaller, cheaper model is the usual
choice for extraction; without one the answering model does it). Its backend comes from the chat router
(:func:`chalicelib.deps.chat_backend`), so the model may live on an OpenAI-compatible server or on Bedrock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chalicelib.config import ENV_CHAT_BASE_URL, ENV_CHAT_MODEL, ENV_CHAT_PROVIDER, ENV_MEMORY_MODEL, Settings
from chalicelib.errors import InvalidRequestError

if TYPE_CHECKING:  # pragma: no cover
    from chalicelib.chat.base import ChatBackend

__all__ = ["backend", "model_name", "optional_backend", "required_model"]


def model_name(settings: Settings) -> str | None:
    """The memory model's name (``ENGRAM_MEMORY_MODEL``, else ``ENGRAM_CHAT_MODEL``), or None when neither is
    set."""
    return settings.memory_model or settings.chat_model or None


def required_model(settings: Settings) -> str:
    """The memory model's name, for an add that asked for inference.

    Raises:
        InvalidRequestError: (400, param ``infer``, code ``model_not_configured``) none is configured; the message
            names the settings.
    """
    model = model_name(settings)
    if not model:
        raise InvalidRequestError(
            f"'infer': true needs a model to extract memories, and none is configured. Set {ENV_MEMORY_MODEL} (or "
            f"{ENV_CHAT_MODEL}) and a chat backend ({ENV_CHAT_BASE_URL}, or {ENV_CHAT_PROVIDER}=bedrock), or add "
            "with 'infer': false to store the messages as they are.", param="infer", code="model_not_configured")
    return model


def backend(settings: Settings, model: str) -> ChatBackend:
    """The chat backend answering ``model``.

    Raises:
        InvalidRequestError: (400, param ``model``, code ``model_not_available``) no backend is configured for it.
    """
    from chalicelib import deps

    return deps.chat_backend(model, settings)


def optional_backend(settings: Settings) -> tuple[ChatBackend | None, str | None]:
    """``(backend, model)`` for the lifecycle jobs, or ``(None, None)`` when no memory model is configured or no
    backend answers it (the jobs then do what they can without one: extractive summaries, duplicates only)."""
    model = model_name(settings)
    if model is None:
        return None, None
    try:
        return backend(settings, model), model
    except InvalidRequestError:
        return None, None
