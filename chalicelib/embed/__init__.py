"""Embedders: the :class:`Embedder` / :class:`Tokenizer` port and :func:`build_embedder`, its factory.

Providers (``Settings.embedding_provider``):
    local    — all-MiniLM-L6-v2 on CPU, offline (``chalicelib.embed.local``); the default.
    openai   — any OpenAI-compatible ``/embeddings`` endpoint (``chalicelib.embed.openai_http``).
    bedrock  — Amazon Titan Text Embeddings (``chalicelib.embed.bedrock``).
    hashing  — deterministic feature hashing, for fast tests only (``chalicelib.embed.hashing``).

Importing this package is cheap: no torch, sentence-transformers, boto3 or httpx; each provider's module is
imported only when chosen (or when its class is first accessed as an attribute of this package).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chalicelib.config import DEFAULT_MODELS
from chalicelib.embed.base import Embedder, Tokenizer
from chalicelib.errors import ConfigurationError

if TYPE_CHECKING:
    from chalicelib.config import Settings

__all__ = [
    "Embedder",
    "Tokenizer",
    "build_embedder",
    "OpenAIEmbedder",
    "BedrockTitanEmbedder",
    "LocalEmbedder",
    "HashingEmbedder",
    "EstimatingTokenizer",
    "WordPieceTokenizer",
]

_LAZY = {
    "OpenAIEmbedder": "chalicelib.embed.openai_http",
    "EstimatingTokenizer": "chalicelib.embed.openai_http",
    "BedrockTitanEmbedder": "chalicelib.embed.bedrock",
    "LocalEmbedder": "chalicelib.embed.local",
    "WordPieceTokenizer": "chalicelib.embed.local",
    "HashingEmbedder": "chalicelib.embed.hashing",
}


def __getattr__(name: str) -> Any:
    """Import a provider class on first access, e.g. ``chalicelib.embed.HashingEmbedder``."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def build_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings`` ask for (``embedding_provider`` and the other ``embedding_*`` fields).

    Nothing slow happens here: the local model, Bedrock client and dimension probes are all deferred to first use.
    A ``Settings`` whose model is still the local default (``all-MiniLM-L6-v2``, e.g. built with
    ``dataclasses.replace(s, embedding_provider="openai")``) gets the chosen provider's default model instead.

    Raises:
        ConfigurationError: unknown provider, or settings the provider cannot honour (e.g. a local model name
            that is neither the bundled all-MiniLM-L6-v2 nor a model folder, Titan dimensions not 256/512/1024).
        UpstreamError: the local model package/folder is missing.
    """
    provider = settings.embedding_provider
    model = settings.embedding_model
    if provider != "local" and provider in DEFAULT_MODELS and model == DEFAULT_MODELS["local"]:
        model = DEFAULT_MODELS[provider]
    if provider == "local":
        from chalicelib.embed.local import MODEL_NAME, LocalEmbedder

        if model in (MODEL_NAME, f"sentence-transformers/{MODEL_NAME}"):
            model_path = None
        elif Path(model).expanduser().is_dir():
            model_path = Path(model).expanduser()
        else:
            raise ConfigurationError(
                f"ENGRAM_EMBEDDING_MODEL={model!r}: the local provider runs the bundled {MODEL_NAME} or a "
                "sentence-transformers model folder given by path.", setting="ENGRAM_EMBEDDING_MODEL"
            )
        return LocalEmbedder(model_path, max_input_tokens=settings.embedding_max_input_tokens)
    if provider == "openai":
        from chalicelib.embed.openai_http import OpenAIEmbedder

        return OpenAIEmbedder(
            base_url=settings.embedding_base_url,
            api_key=settings.embedding_api_key,
            model=model,
            dimensions=settings.embedding_dimensions,
            max_input_tokens=settings.embedding_max_input_tokens,
            timeout_s=settings.embedding_timeout_s,
            max_retries=settings.embedding_max_retries,
        )
    if provider == "bedrock":
        from chalicelib.embed.bedrock import BedrockTitanEmbedder

        return BedrockTitanEmbedder(
            model=model,
            dimensions=settings.embedding_dimensions,
            region=settings.aws_region,
            max_retries=settings.embedding_max_retries,
            timeout_s=settings.embedding_timeout_s,
            max_input_tokens=settings.embedding_max_input_tokens,
        )
    if provider == "hashing":
        from chalicelib.embed.hashing import DEFAULT_DIMENSION, HashingEmbedder

        dimension = settings.embedding_dimensions
        if dimension is None:
            match = re.fullmatch(r"hashing-(\d+)", model)
            dimension = int(match.group(1)) if match else DEFAULT_DIMENSION
        return HashingEmbedder(dimension)
    raise ConfigurationError(
        f"Unknown embedding provider {provider!r}; expected local, openai, bedrock or hashing.",
        setting="ENGRAM_EMBEDDING_PROVIDER",
    )
