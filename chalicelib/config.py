"""Engram's settings: one frozen object, read from the environment once (explicit > env > default).

Environment variable names are the module constants below; every field names its unit (``_s`` seconds,
``_bytes`` bytes, ``_tokens`` tokens) and carries its variable in its metadata, so each default is written once
(the field's) and ``Settings.from_env()`` — the only place that reads ``os.environ`` for configuration — reads
every field the same way. ``settings()`` caches it for the process.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chalicelib.errors import ConfigurationError

ENV_DATABASE_URL = "DATABASE_URL"
ENV_DATA_DIR = "ENGRAM_DATA_DIR"
ENV_TENANT = "ENGRAM_TENANT"
ENV_EMBEDDING_PROVIDER = "ENGRAM_EMBEDDING_PROVIDER"
ENV_EMBEDDING_MODEL = "ENGRAM_EMBEDDING_MODEL"
ENV_EMBEDDING_BASE_URL = "ENGRAM_EMBEDDING_BASE_URL"
ENV_EMBEDDING_API_KEY = "ENGRAM_EMBEDDING_API_KEY"
ENV_EMBEDDING_DIMENSIONS = "ENGRAM_EMBEDDING_DIMENSIONS"
ENV_EMBEDDING_MAX_INPUT_TOKENS = "ENGRAM_EMBEDDING_MAX_INPUT_TOKENS"
ENV_EMBEDDING_TIMEOUT_S = "ENGRAM_EMBEDDING_TIMEOUT_S"
ENV_EMBEDDING_MAX_RETRIES = "ENGRAM_EMBEDDING_MAX_RETRIES"
ENV_AWS_REGION = "AWS_REGION"
ENV_HNSW_EF_SEARCH = "ENGRAM_HNSW_EF_SEARCH"
ENV_EXACT_SCAN_MAX_ROWS = "ENGRAM_EXACT_SCAN_MAX_ROWS"
ENV_MAX_FILE_BYTES = "ENGRAM_MAX_FILE_BYTES"
# What one parse may do (chalicelib/ingest/parse/limits.py: ParseLimits).
ENV_PARSE_MAX_PAGES = "ENGRAM_PARSE_MAX_PAGES"
ENV_PARSE_MAX_CHARS = "ENGRAM_PARSE_MAX_CHARS"
ENV_PARSE_MAX_DOCX_UNCOMPRESSED_BYTES = "ENGRAM_PARSE_MAX_DOCX_UNCOMPRESSED_BYTES"
ENV_PARSE_MAX_COMPRESSION_RATIO = "ENGRAM_PARSE_MAX_COMPRESSION_RATIO"
ENV_PARSE_MAX_ZIP_MEMBERS = "ENGRAM_PARSE_MAX_ZIP_MEMBERS"
ENV_PARSE_MAX_NESTING = "ENGRAM_PARSE_MAX_NESTING"
ENV_PARSE_TIMEOUT_S = "ENGRAM_PARSE_TIMEOUT_S"
ENV_PARSE_WALL_TIMEOUT_S = "ENGRAM_PARSE_WALL_TIMEOUT_S"
ENV_AUTH_MODE = "ENGRAM_AUTH_MODE"
ENV_DB_POOL_SIZE = "ENGRAM_DB_POOL_SIZE"
ENV_DB_CONNECT_TIMEOUT_S = "ENGRAM_DB_CONNECT_TIMEOUT_S"
ENV_DB_POOL_TIMEOUT_S = "ENGRAM_DB_POOL_TIMEOUT_S"
ENV_INLINE_MAX_BYTES = "ENGRAM_INLINE_MAX_BYTES"
ENV_INLINE_INGEST = "ENGRAM_INLINE_INGEST"
ENV_MAX_REQUEST_BYTES = "ENGRAM_MAX_REQUEST_BYTES"
ENV_INLINE_BUDGET_S = "ENGRAM_INLINE_BUDGET_S"
ENV_PROCESSING_LEASE_S = "ENGRAM_PROCESSING_LEASE_S"
ENV_PROCESSING_MAX_ATTEMPTS = "ENGRAM_PROCESSING_MAX_ATTEMPTS"
ENV_EXPIRED_RETENTION_S = "ENGRAM_EXPIRED_RETENTION_S"
ENV_POLL_AFTER_MS = "ENGRAM_POLL_AFTER_MS"
ENV_BUCKET = "ENGRAM_BUCKET"
# Serverless ingestion (issue 4). AWS endpoints (moto locally) come from boto3's own AWS_ENDPOINT_URL[_S3|_SQS].
ENV_INGEST_QUEUE = "ENGRAM_INGEST_QUEUE"
ENV_EMBED_QUEUE = "ENGRAM_EMBED_QUEUE"
ENV_EMBED_BATCH_CHUNKS = "ENGRAM_EMBED_BATCH_CHUNKS"
ENV_MAX_RECEIVES = "ENGRAM_MAX_RECEIVES"
ENV_DATABASE_SECRET_ARN = "ENGRAM_DATABASE_SECRET_ARN"
ENV_AUTO_MIGRATE = "ENGRAM_AUTO_MIGRATE"
# Chat backends, the Responses API and summarization (issue 5).
ENV_CHAT_PROVIDER = "ENGRAM_CHAT_PROVIDER"
ENV_CHAT_BASE_URL = "ENGRAM_CHAT_BASE_URL"
ENV_CHAT_API_KEY = "ENGRAM_CHAT_API_KEY"
ENV_CHAT_MODEL_ROUTES = "ENGRAM_CHAT_MODEL_ROUTES"
ENV_CHAT_TIMEOUT_S = "ENGRAM_CHAT_TIMEOUT_S"
ENV_MCP_ALLOWED_HOSTS = "ENGRAM_MCP_ALLOWED_HOSTS"
ENV_MCP_TIMEOUT_S = "ENGRAM_MCP_TIMEOUT_S"
ENV_MCP_MAX_RESPONSE_BYTES = "ENGRAM_MCP_MAX_RESPONSE_BYTES"
ENV_CHAT_MAX_RETRIES = "ENGRAM_CHAT_MAX_RETRIES"
ENV_SUMMARY_MODEL = "ENGRAM_SUMMARY_MODEL"
ENV_SUMMARY_THRESHOLD_TOKENS = "ENGRAM_SUMMARY_THRESHOLD_TOKENS"
ENV_SUMMARY_KEEP_TURNS = "ENGRAM_SUMMARY_KEEP_TURNS"
# Agent memory (issue 12).
ENV_CHAT_MODEL = "ENGRAM_CHAT_MODEL"
ENV_MEMORY_MODEL = "ENGRAM_MEMORY_MODEL"
ENV_MEMORY_QUEUE = "ENGRAM_MEMORY_QUEUE"
ENV_MEMORY_NEAR_DUPLICATE = "ENGRAM_MEMORY_NEAR_DUPLICATE"
ENV_MEMORY_HALF_LIFE_DAYS = "ENGRAM_MEMORY_HALF_LIFE_DAYS"
ENV_MEMORY_DECAY_FLOOR = "ENGRAM_MEMORY_DECAY_FLOOR"
# The vector backend (issue 23).
ENV_VECTOR_BACKEND = "ENGRAM_VECTOR_BACKEND"
ENV_MEMORY_BACKEND = "ENGRAM_MEMORY_BACKEND"
ENV_QDRANT_URL = "ENGRAM_QDRANT_URL"
ENV_QDRANT_API_KEY = "ENGRAM_QDRANT_API_KEY"
ENV_QDRANT_SECRET_ARN = "ENGRAM_QDRANT_SECRET_ARN"
ENV_QDRANT_TIMEOUT_S = "ENGRAM_QDRANT_TIMEOUT_S"
ENV_QDRANT_COLLECTION_PREFIX = "ENGRAM_QDRANT_COLLECTION_PREFIX"
ENV_QDRANT_INDEXING_THRESHOLD_KB = "ENGRAM_QDRANT_INDEXING_THRESHOLD_KB"

# keys: every request needs an API key created with `engram keys create`; dev: any bearer token is accepted and
# acts as ENGRAM_TENANT (local development only; the server warns loudly at start).
AUTH_MODES = ("keys", "dev")

# openai: any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, LiteLLM); bedrock: Converse API.
CHAT_PROVIDERS = ("openai", "bedrock", "scripted")

EMBEDDING_PROVIDERS = ("local", "openai", "bedrock", "hashing")

# Where a vector store's (or a tenant's memories') candidates live (chalicelib/search/backends): the one table of
# backend name -> adapter factory (``module:function``, resolved on first use; docs/vector-backends.md says what an
# adapter implements). pgvector in Postgres (the default), or Qdrant (a server or cluster at ENGRAM_QDRANT_URL;
# without it, the embedded Qdrant Edge engine under the data folder). Postgres stays the system of record either way.
VECTOR_BACKEND_ADAPTERS = {
    "pgvector": "chalicelib.search.backends.pgvector:adapter",
    "qdrant": "chalicelib.search.backends.qdrant:adapter",
}
VECTOR_BACKENDS = tuple(VECTOR_BACKEND_ADAPTERS)
# The backend whose candidates are Postgres' own indexes (migration 0026's engram_backend_in_postgres).
DEFAULT_VECTOR_BACKEND = VECTOR_BACKENDS[0]

# Default model per embedding provider.
DEFAULT_MODELS = {
    "local": "all-MiniLM-L6-v2",
    "openai": "text-embedding-3-small",
    "bedrock": "amazon.titan-embed-text-v2:0",
    "hashing": "hashing-384",
}


def _default_data_dir() -> Path:
    return Path.home() / ".engram"


def _env(name: str, *, choices: tuple[str, ...] | None = None, fallback: str | None = None) -> dict[str, Any]:
    """Field metadata: the variable ``name`` that sets it, the allowed ``choices`` (lower-cased), and a
    ``fallback`` variable read when ``name`` is unset (e.g. ``OPENAI_API_KEY``)."""
    return {"env": name, "choices": choices, "fallback": fallback}


def setting(default: Any, env: str, **options: Any) -> Any:
    """A :class:`Settings` field with ``default``, read from the variable ``env`` (see :func:`_env`)."""
    return dataclasses.field(default=default, metadata=_env(env, **options))


@dataclass(frozen=True, slots=True)
class Settings:
    """Process-wide configuration. Build with :meth:`from_env`; tests use ``dataclasses.replace``."""

    database_url: str | None = setting(None, ENV_DATABASE_URL)  # None → embedded Postgres (store/embedded.py)
    data_dir: Path = dataclasses.field(default_factory=_default_data_dir,  # default ~/.engram
                                       metadata=_env(ENV_DATA_DIR))
    tenant: str = setting("local", ENV_TENANT)  # the tenant the CLI acts for
    # local | openai | bedrock | hashing (hashing: tests only).
    embedding_provider: str = setting("local", ENV_EMBEDDING_PROVIDER, choices=EMBEDDING_PROVIDERS)
    # Unset: the provider's default model (DEFAULT_MODELS).
    embedding_model: str = setting(DEFAULT_MODELS["local"], ENV_EMBEDDING_MODEL)
    embedding_base_url: str = setting("https://api.openai.com/v1", ENV_EMBEDDING_BASE_URL)  # OpenAI-compatible /v1
    embedding_api_key: str | None = setting(None, ENV_EMBEDDING_API_KEY, fallback="OPENAI_API_KEY")
    # Shortened vectors (OpenAI text-embedding-3, Titan v2).
    embedding_dimensions: int | None = setting(None, ENV_EMBEDDING_DIMENSIONS)
    embedding_max_input_tokens: int | None = setting(None, ENV_EMBEDDING_MAX_INPUT_TOKENS)  # override the model's
    embedding_timeout_s: float = setting(60.0, ENV_EMBEDDING_TIMEOUT_S)
    embedding_max_retries: int = setting(6, ENV_EMBEDDING_MAX_RETRIES)
    aws_region: str = setting("us-east-1", ENV_AWS_REGION, fallback="AWS_DEFAULT_REGION")
    hnsw_ef_search: int = setting(100, ENV_HNSW_EF_SEARCH)  # pgvector hnsw.ef_search for unfiltered / broad searches
    # Searches whose scope holds ≤ this many chunks may scan exactly (recall 1.0) when that costs less than the
    # HNSW scan (search/vector.py: prefer_exact); 0 forces HNSW.
    exact_scan_max_rows: int = setting(10_000, ENV_EXACT_SCAN_MAX_ROWS)
    max_file_bytes: int = setting(512 * 1024 * 1024, ENV_MAX_FILE_BYTES)  # largest file ingested (OpenAI's limit)
    # What one parse may do (Engram's own bounds: ParseLimits says why each is sized as it is).
    parse_max_pages: int = setting(5000, ENV_PARSE_MAX_PAGES)  # pages of a PDF
    parse_max_chars: int = setting(50_000_000, ENV_PARSE_MAX_CHARS)  # characters of extracted text
    parse_max_docx_uncompressed_bytes: int = setting(200 * 1024 * 1024, ENV_PARSE_MAX_DOCX_UNCOMPRESSED_BYTES)
    parse_max_compression_ratio: float = setting(100.0, ENV_PARSE_MAX_COMPRESSION_RATIO)  # a DOCX zip member's
    parse_max_zip_members: int = setting(10_000, ENV_PARSE_MAX_ZIP_MEMBERS)
    parse_max_nesting: int = setting(100, ENV_PARSE_MAX_NESTING)  # JSON values, DOCX tables in tables
    parse_timeout_s: float = setting(120.0, ENV_PARSE_TIMEOUT_S)  # CPU seconds of the parsing thread
    parse_wall_timeout_s: float = setting(600.0, ENV_PARSE_WALL_TIMEOUT_S)  # wall-clock cap (retryable)
    auth_mode: str = setting("keys", ENV_AUTH_MODE, choices=AUTH_MODES)
    db_pool_size: int = setting(8, ENV_DB_POOL_SIZE)  # connections per process in the API's pool
    # Longest one connection attempt may take, seconds (libpq ``connect_timeout``: TCP connect, TLS, authentication;
    # whole seconds, libpq's minimum is 2, 0 waits forever). An unreachable host (a dropped SYN, a failover) costs a
    # request at most this; a refused connection fails at once. 3 s: a healthy connect takes milliseconds in a VPC,
    # and ~3 s leaves room for one lost SYN (Linux retransmits it after 1 s).
    db_connect_timeout_s: int = setting(3, ENV_DB_CONNECT_TIMEOUT_S)
    # Longest a request waits for a pooled connection, seconds (psycopg_pool's ``timeout``; its default, 30 s, is
    # what every request waited while the database was down). Past it the request answers 503 database_unavailable
    # with Retry-After; it stops waiting sooner when a connection attempt fails meanwhile (store/pooling.py).
    db_pool_timeout_s: float = setting(3.0, ENV_DB_POOL_TIMEOUT_S)
    inline_max_bytes: int = setting(1024 * 1024, ENV_INLINE_MAX_BYTES)  # attach requests this small run inline
    # False: attach requests never parse or embed in the request, whatever their size; every file goes through the
    # dispatcher (deployed: the ingest queue, so the API function needs no parsers' dependencies; issue 16).
    inline_ingest: bool = setting(True, ENV_INLINE_INGEST)
    # ... and only as much of them as the embedder's measured rate fits in this many seconds (the rest is queued);
    # 0 queues every attach.
    inline_budget_s: float = setting(2.5, ENV_INLINE_BUDGET_S)
    # API Gateway's request payload cap (bytes); larger files use /v1/uploads.
    max_request_bytes: int = setting(10 * 1024 * 1024, ENV_MAX_REQUEST_BYTES)
    # A worker that holds a file longer (seconds) is presumed dead; the file is retried.
    processing_lease_s: float = setting(300.0, ENV_PROCESSING_LEASE_S)
    processing_max_attempts: int = setting(3, ENV_PROCESSING_MAX_ATTEMPTS)  # then the file fails with last_error
    # Expired vector stores stay visible (status "expired") this long, seconds.
    expired_retention_s: float = setting(86_400.0, ENV_EXPIRED_RETENTION_S)
    poll_after_ms: int = setting(500, ENV_POLL_AFTER_MS)  # openai-poll-after-ms on in_progress objects
    bucket: str | None = setting(None, ENV_BUCKET)  # S3 bucket for file bytes and parts; None → data_dir/blobs
    # --- serverless ingestion ---
    ingest_queue: str | None = setting(None, ENV_INGEST_QUEUE)  # SQS queue name/URL; None → in-process
    embed_queue: str | None = setting(None, ENV_EMBED_QUEUE)  # SQS queue name/URL for embedding batches
    embed_batch_chunks: int = setting(64, ENV_EMBED_BATCH_CHUNKS)  # chunks per embedding-batch message
    max_receives: int = setting(5, ENV_MAX_RECEIVES)  # SQS maxReceiveCount before the dead-letter queue
    database_secret_arn: str | None = setting(None, ENV_DATABASE_SECRET_ARN)  # Secrets Manager secret with the DSN
    auto_migrate: bool = setting(True, ENV_AUTO_MIGRATE)  # apply migrations on first connect (off when deployed)
    # --- chat backends and the Responses API ---
    chat_provider: str = setting("openai", ENV_CHAT_PROVIDER, choices=CHAT_PROVIDERS)  # the default backend
    chat_base_url: str | None = setting(None, ENV_CHAT_BASE_URL)  # OpenAI-compatible /v1 root; None (not bedrock) → off
    chat_api_key: str | None = setting(None, ENV_CHAT_API_KEY)
    chat_model_routes: str | None = setting(None, ENV_CHAT_MODEL_ROUTES)  # "pattern=provider[,...]" (chat.routing)
    chat_timeout_s: float = setting(120.0, ENV_CHAT_TIMEOUT_S)  # per backend call
    chat_max_retries: int = setting(2, ENV_CHAT_MAX_RETRIES)  # retries on 429/5xx/timeouts, exponential backoff
    # The Responses API's mcp tool (chalicelib/responses/mcp_tool.py): remote MCP servers are reached only at public
    # addresses unless listed here ("localhost,127.0.0.0/8,::1": host names, addresses, CIDR ranges; "*": anything;
    # the local stack allows loopback), each listing or call within this many seconds, each answer at most this many
    # bytes.
    mcp_allowed_hosts: str | None = setting(None, ENV_MCP_ALLOWED_HOSTS)
    mcp_timeout_s: float = setting(20.0, ENV_MCP_TIMEOUT_S)
    mcp_max_response_bytes: int = setting(1024 * 1024, ENV_MCP_MAX_RESPONSE_BYTES)
    summary_model: str | None = setting(None, ENV_SUMMARY_MODEL)  # smaller model for summaries; None → request's
    # History above this many tokens gets its older turns summarized.
    summary_threshold_tokens: int = setting(8000, ENV_SUMMARY_THRESHOLD_TOKENS)
    summary_keep_turns: int = setting(4, ENV_SUMMARY_KEEP_TURNS)  # most recent turns kept verbatim
    # --- agent memory ---
    # The model Engram calls on its own behalf when no request names one (memory extraction, summaries).
    chat_model: str | None = setting(None, ENV_CHAT_MODEL)
    memory_model: str | None = setting(None, ENV_MEMORY_MODEL)  # extraction and decisions; None → chat_model
    memory_queue: str | None = setting(None, ENV_MEMORY_QUEUE)  # SQS queue for asynchronous adds; None → in-process
    # Cosine similarity at or above which a new fact is the same as a stored memory (NOOP, no model call).
    memory_near_duplicate: float = setting(0.95, ENV_MEMORY_NEAR_DUPLICATE)
    memory_half_life_days: float = setting(90.0, ENV_MEMORY_HALF_LIFE_DAYS)  # decay half-life (seed 000)
    # Decay never scores a memory below this: 0.9 keeps LoCoMo Recall@10 of memories written at their session times
    # at 0.744 (0.382 at 0.5, 0.753 without decay; benchmarks/memory.py --aged, README).
    memory_decay_floor: float = setting(0.9, ENV_MEMORY_DECAY_FLOOR)
    # New vector stores' backend (existing stores keep theirs; `engram stores reindex` moves one).
    vector_backend: str = setting(DEFAULT_VECTOR_BACKEND, ENV_VECTOR_BACKEND, choices=VECTOR_BACKENDS)
    # The backend of users' memory and exchange histories (a tenant's own choice, tenants.memory_backend, wins;
    # existing histories keep theirs: `engram memory reindex --backend` moves a tenant's).
    memory_backend: str = setting(DEFAULT_VECTOR_BACKEND, ENV_MEMORY_BACKEND, choices=VECTOR_BACKENDS)
    # A Qdrant server or cluster (its REST root, e.g. https://xyz.cloud.qdrant.io:6333); None → the embedded engine
    # under <data_dir>/qdrant (local development and tests only: one process opens it at a time).
    qdrant_url: str | None = setting(None, ENV_QDRANT_URL)
    qdrant_api_key: str | None = setting(None, ENV_QDRANT_API_KEY)  # sent as the api-key header
    qdrant_secret_arn: str | None = setting(None, ENV_QDRANT_SECRET_ARN)  # Secrets Manager: the API key (deployed)
    qdrant_timeout_s: float = setting(10.0, ENV_QDRANT_TIMEOUT_S)  # per request to the server
    # Collections are named <prefix>chunks_<dim> (and <prefix>memories_<dim>, <prefix>exchanges_<dim>).
    qdrant_collection_prefix: str = setting("engram_", ENV_QDRANT_COLLECTION_PREFIX)
    # The embedded engine's indexing threshold (KB of vectors in a segment before it gets an HNSW index) for
    # collections it creates; None → the engine's default (10,000 KB, ~6,500 384-d vectors). Tests set it low.
    qdrant_indexing_threshold_kb: int | None = setting(None, ENV_QDRANT_INDEXING_THRESHOLD_KB)

    @property
    def unclaimed_after_s(self) -> float:
        """Seconds a file may wait for its first worker before it is failed: every attempt's lease, end to end."""
        return self.processing_lease_s * self.processing_max_attempts

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every setting from ``environ`` (default ``os.environ``); unset or empty variables keep the field's
        default (the embedding model's default follows the provider).

        Raises:
            ConfigurationError: a variable holds a value of the wrong kind or outside its choices (the message
                names it).
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for spec in dataclasses.fields(cls):
            name, fallback = spec.metadata["env"], spec.metadata["fallback"]
            raw = env.get(name) or (env.get(fallback) if fallback else None)
            if raw is None or raw.strip() == "":
                continue
            values[spec.name] = _parse(name, raw, str(spec.type), spec.metadata["choices"])
        if "embedding_model" not in values:
            values["embedding_model"] = DEFAULT_MODELS[values.get("embedding_provider", "local")]
        return cls(**values)


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _parse(name: str, raw: str, kind: str, choices: tuple[str, ...] | None) -> Any:
    """``raw`` (the variable ``name``'s value) as the field type ``kind`` (its annotation, as written).

    Raises:
        ConfigurationError: not of that kind, or not among ``choices``.
    """
    if choices is not None:
        value = raw.strip().lower()
        if value not in choices:
            raise ConfigurationError(f"{name}={value!r} is not one of {', '.join(choices)}.", setting=name)
        return value
    base = kind.replace(" | None", "")
    try:
        if base == "int":
            return int(raw)
        if base == "float":
            return float(raw)
    except ValueError:
        noun = "an integer" if base == "int" else "a number"
        raise ConfigurationError(f"{name} must be {noun}, got {raw!r}.", setting=name) from None
    if base == "bool":
        value = raw.strip().lower()
        if value not in _TRUE + _FALSE:
            raise ConfigurationError(f"{name} must be true or false, got {raw!r}.", setting=name)
        return value in _TRUE
    if base == "Path":
        return Path(raw).expanduser()
    return raw


def env_name(field: str) -> str:
    """The environment variable that sets the :class:`Settings` field ``field`` (e.g. ``ingest_queue`` →
    ``ENGRAM_INGEST_QUEUE``).

    Raises:
        KeyError: no such field.
    """
    for spec in dataclasses.fields(Settings):
        if spec.name == field:
            return str(spec.metadata["env"])
    raise KeyError(field)


@functools.cache
def settings() -> Settings:
    """The process's settings, read from the environment on first call and cached."""
    return Settings.from_env()
