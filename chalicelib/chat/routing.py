"""Which chat backend answers a request's ``model``: configuration, not code.

``ENGRAM_CHAT_MODEL_ROUTES`` (``settings.chat_model_routes``) is a comma-separated list of ``pattern=provider``
rules, tried in order; the first whose shell-style pattern (``fnmatch``, case-sensitive) matches the model wins::

    ENGRAM_CHAT_MODEL_ROUTES="anthropic.*=bedrock,us.anthropic.*=bedrock,amazon.nova-*=bedrock,*=openai"

A model no rule matches goes to ``ENGRAM_CHAT_PROVIDER`` (default ``openai``). Providers: ``openai`` — any
OpenAI-compatible Chat Completions endpoint at ``ENGRAM_CHAT_BASE_URL`` (with ``ENGRAM_CHAT_API_KEY``); ``bedrock`` —
Amazon Bedrock Converse in ``AWS_REGION`` (``settings.aws_region``) with the process's AWS credentials;
``scripted`` — the scripted local model (:mod:`chalicelib.chat.scripted`: no weights, no network; the demo's),
which the model name ``engram-scripted`` always reaches.
Timeouts and retries for both: ``ENGRAM_CHAT_TIMEOUT_S`` (seconds), ``ENGRAM_CHAT_MAX_RETRIES``.

Backends are built once per process per configuration by the composition root (:func:`chalicelib.deps.chat_backend`)
and shared across threads (their HTTP/boto3 clients pool connections).
"""

from __future__ import annotations

import fnmatch
from typing import Any

from chalicelib.chat.base import ChatBackend
from chalicelib.config import (
    CHAT_PROVIDERS,
    ENV_CHAT_BASE_URL,
    ENV_CHAT_MODEL_ROUTES,
    ENV_CHAT_PROVIDER,
    Settings,
)
from chalicelib.errors import ConfigurationError, InvalidRequestError


def parse_routes(routes: str | None) -> list[tuple[str, str]]:
    """``"pattern=provider[,pattern=provider...]"`` → ``[(pattern, provider), ...]`` in order (blank entries skipped).

    Raises:
        ConfigurationError: (500, a server misconfiguration) an entry without ``=`` or with an unknown provider.
    """
    rules: list[tuple[str, str]] = []
    for entry in (routes or "").split(","):
        if not entry.strip():
            continue
        pattern, sep, provider = entry.partition("=")
        pattern, provider = pattern.strip(), provider.strip().lower()
        if not sep or not pattern or provider not in CHAT_PROVIDERS:
            raise ConfigurationError(f"{ENV_CHAT_MODEL_ROUTES} entry {entry.strip()!r} is not 'pattern=provider' "
                                     "with a "
                              f"provider among {', '.join(CHAT_PROVIDERS)}.", setting=ENV_CHAT_MODEL_ROUTES)
        rules.append((pattern, provider))
    return rules


def provider_for(settings: Settings, model: str) -> str:
    """The provider (``openai`` | ``bedrock`` | ``scripted``) configured for ``model``: the first matching route, else
    ``settings.chat_provider``.

    Raises:
        ConfigurationError: see :func:`parse_routes`.
    """
    from chalicelib.chat.scripted import MODEL as SCRIPTED_MODEL

    if model == SCRIPTED_MODEL:
        return "scripted"
    for pattern, provider in parse_routes(settings.chat_model_routes):
        if fnmatch.fnmatchcase(model, pattern):
            return provider
    return settings.chat_provider


def backend_key(settings: Settings, model: str) -> tuple[Any, ...]:
    """What identifies the backend that answers ``model``: its provider and the settings it is built from. Two
    models with the same key share one backend (and its connection pool).

    Raises:
        InvalidRequestError: (400, param ``model``, code ``model_not_available``) the model routes to the
            ``openai`` provider and ``ENGRAM_CHAT_BASE_URL`` is not set; the message names the settings to set.
        ConfigurationError: (500) a malformed ``ENGRAM_CHAT_MODEL_ROUTES``.
    """
    provider = provider_for(settings, model)
    if provider == "openai" and not settings.chat_base_url:
        raise InvalidRequestError(
            f"No chat model backend is configured for model {model!r}. Set {ENV_CHAT_BASE_URL} to an "
            "OpenAI-compatible endpoint (e.g. http://localhost:11434/v1 for Ollama, or https://api.openai.com/v1 "
            f"with ENGRAM_CHAT_API_KEY), or {ENV_CHAT_PROVIDER}=bedrock to use Amazon Bedrock "
            f"(per-model routing: {ENV_CHAT_MODEL_ROUTES}).",
            param="model", code="model_not_available")
    if provider == "openai":
        return ("openai", settings.chat_base_url, settings.chat_api_key, settings.chat_timeout_s,
                settings.chat_max_retries)
    if provider == "scripted":
        return ("scripted",)
    return ("bedrock", settings.aws_region, settings.chat_timeout_s, settings.chat_max_retries)


def build_backend(settings: Settings, provider: str) -> ChatBackend:
    """A new backend for ``provider`` (``openai`` | ``bedrock`` | ``scripted``) from ``settings`` (the composition
    root, :func:`chalicelib.deps.chat_backend`, caches it)."""
    if provider == "openai":
        from chalicelib.chat.openai_compat import OpenAICompatBackend

        assert settings.chat_base_url is not None
        return OpenAICompatBackend(base_url=settings.chat_base_url, api_key=settings.chat_api_key,
                                   timeout_s=settings.chat_timeout_s, max_retries=settings.chat_max_retries)
    if provider == "scripted":
        from chalicelib.chat.scripted import ScriptedBackend

        return ScriptedBackend()
    from chalicelib.chat.bedrock import BedrockBackend

    return BedrockBackend(region=settings.aws_region, timeout_s=settings.chat_timeout_s,
                          max_retries=settings.chat_max_retries)
