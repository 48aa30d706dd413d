"""Engram's settings: one frozen object, read from the environment once (explicit > env > default).

Environment variable names are the module constants below; every field names its unit (``_s`` seconds,
``_bytes`` bytes, ``_tokens`` tokens). ``Settings.from_env()`` is the only place that reads ``os.environ``
for configuration; ``settings()`` caches it for the process.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from chalicelib.errors import InvalidRequestError

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
ENV_AUTH_MODE = "ENGRAM_AUTH_MODE"
ENV_DB_POOL_SIZE = "ENGRAM_DB_POOL_SIZE"
ENV_INLINE_MAX_BYTES = "ENGRAM_INLINE_MAX_BYTES"
ENV_MAX_REQUEST_BYTES = "ENGRAM_MAX_REQUEST_BYTES"
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
ENV_CHAT_MAX_RETRIES = "ENGRAM_CHAT_MAX_RETRIES"
ENV_SUMMARY_MODEL = "ENGRAM_SUMMARY_MODEL"
ENV_SUMMARY_THRESHOLD_TOKENS = "ENGRAM_SUMMARY_THRESHOLD_TOKENS"
ENV_SUMMARY_KEEP_TURNS = "ENGRAM_SUMMARY_KEEP_TURNS"

# keys: every request needs an API key created with `engram keys create`; dev: any bearer token is accepted and
# acts as ENGRAM_TENANT (local development only; the server warns loudly at start).
AUTH_MODES = ("keys", "dev")

# openai: any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, LiteLLM); bedrock: Converse API.
CHAT_PROVIDERS = ("openai", "bedrock")

EMBEDDING_PROVIDERS = ("local", "openai", "bedrock", "hashing")

# Default model per embedding provider.
DEFAULT_MODELS = {
    "local": "all-MiniLM-L6-v2",
    "openai": "text-embedding-3-small",
    "bedrock": "amazon.titan-embed-text-v2:0",
    "hashing": "hashing-384",
}


def _default_data_dir() -> Path:
    return Path.home() / ".engram"


@dataclass(frozen=True, slots=True)
class Settings:
    """Process-wide configuration. Build with :meth:`from_env`; tests use ``dataclasses.replace``."""

    database_url: str | None = None  # DATABASE_URL; None → embedded Postgres (store/embedded.py) under data_dir/pg
    data_dir: Path = dataclasses.field(default_factory=_default_data_dir)  # ENGRAM_DATA_DIR; default ~/.engram
    tenant: str = "local"  # ENGRAM_TENANT: tenant the CLI acts for
    embedding_provider: str = "local"  # local | openai | bedrock | hashing (hashing: tests only)
    embedding_model: str = DEFAULT_MODELS["local"]
    embedding_base_url: str = "https://api.openai.com/v1"  # any OpenAI-compatible /v1 root
    embedding_api_key: str | None = None
    embedding_dimensions: int | None = None  # request shortened vectors (OpenAI text-embedding-3, Titan v2)
    embedding_max_input_tokens: int | None = None  # override the embedder's input limit (tokens)
    embedding_timeout_s: float = 60.0
    embedding_max_retries: int = 6
    aws_region: str = "us-east-1"
    hnsw_ef_search: int = 100  # pgvector hnsw.ef_search for unfiltered / broad searches
    exact_scan_max_rows: int = 10_000  # searches whose scope holds ≤ this many chunks scan exactly (recall 1.0)
    max_file_bytes: int = 512 * 1024 * 1024  # largest file accepted for ingestion, bytes (OpenAI's limit)
    auth_mode: str = "keys"  # ENGRAM_AUTH_MODE: keys | dev
    db_pool_size: int = 8  # connections per process in the API's pool
    inline_max_bytes: int = 1024 * 1024  # files up to this size are processed inside the attaching request
    max_request_bytes: int = 10 * 1024 * 1024  # API Gateway's request payload cap; larger files use /v1/uploads
    processing_lease_s: float = 300.0  # a worker that holds a file longer is presumed dead; the file is retried
    processing_max_attempts: int = 3  # after this many expired leases a file is failed with last_error

    @property
    def unclaimed_after_s(self) -> float:
        """Seconds a file may wait for its first worker before it is failed: every attempt's lease, end to end."""
        return self.processing_lease_s * self.processing_max_attempts
    expired_retention_s: float = 86_400.0  # expired vector stores stay visible (status "expired") this long
    poll_after_ms: int = 500  # openai-poll-after-ms on in_progress objects
    bucket: str | None = None  # ENGRAM_BUCKET: S3 bucket for upload parts; None → files under data_dir/blobs
    # --- serverless ingestion (issue 4) ---
    ingest_queue: str | None = None  # ENGRAM_INGEST_QUEUE: SQS queue name/URL for ingestion; None → in-process
    embed_queue: str | None = None  # ENGRAM_EMBED_QUEUE: SQS queue name/URL for embedding batches
    embed_batch_chunks: int = 64  # chunks per embedding-batch message
    max_receives: int = 5  # SQS maxReceiveCount before a message moves to its dead-letter queue
    database_secret_arn: str | None = None  # ENGRAM_DATABASE_SECRET_ARN: Secrets Manager secret holding the DSN
    auto_migrate: bool = True  # ENGRAM_AUTO_MIGRATE: apply migrations on first connect (off when deployed: `engram migrate`)
    # --- chat backends and the Responses API (issue 5) ---
    chat_provider: str = "openai"  # ENGRAM_CHAT_PROVIDER: openai | bedrock (default backend)
    chat_base_url: str | None = None  # ENGRAM_CHAT_BASE_URL: OpenAI-compatible /v1 root; None (and not bedrock) → off
    chat_api_key: str | None = None  # ENGRAM_CHAT_API_KEY
    chat_model_routes: str | None = None  # ENGRAM_CHAT_MODEL_ROUTES: "pattern=provider[,...]" (see chat.routing)
    chat_timeout_s: float = 120.0  # per backend call, seconds
    chat_max_retries: int = 2  # retries on 429/5xx/timeouts, with exponential backoff
    summary_model: str | None = None  # ENGRAM_SUMMARY_MODEL: smaller model for summaries; None → request's model
    summary_threshold_tokens: int = 8000  # history above this many tokens gets its older turns summarized
    summary_keep_turns: int = 4  # most recent turns kept verbatim when summarizing

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Settings":
        """Read every setting from ``environ`` (default ``os.environ``).

        Raises:
            InvalidRequestError: a variable holds a value of the wrong kind (the message names it).
        """
        env = os.environ if environ is None else environ
        provider = env.get(ENV_EMBEDDING_PROVIDER, "local").strip().lower() or "local"
        if provider not in EMBEDDING_PROVIDERS:
            raise InvalidRequestError(
                f"{ENV_EMBEDDING_PROVIDER}={provider!r} is not one of {', '.join(EMBEDDING_PROVIDERS)}.",
                param=ENV_EMBEDDING_PROVIDER,
            )
        return cls(
            database_url=env.get(ENV_DATABASE_URL) or None,
            data_dir=Path(env[ENV_DATA_DIR]).expanduser() if env.get(ENV_DATA_DIR) else _default_data_dir(),
            tenant=env.get(ENV_TENANT) or "local",
            embedding_provider=provider,
            embedding_model=env.get(ENV_EMBEDDING_MODEL) or DEFAULT_MODELS[provider],
            embedding_base_url=env.get(ENV_EMBEDDING_BASE_URL) or "https://api.openai.com/v1",
            embedding_api_key=env.get(ENV_EMBEDDING_API_KEY) or env.get("OPENAI_API_KEY") or None,
            embedding_dimensions=_int(env, ENV_EMBEDDING_DIMENSIONS, None),
            embedding_max_input_tokens=_int(env, ENV_EMBEDDING_MAX_INPUT_TOKENS, None),
            embedding_timeout_s=_float(env, ENV_EMBEDDING_TIMEOUT_S, 60.0),
            embedding_max_retries=_int(env, ENV_EMBEDDING_MAX_RETRIES, 6),
            aws_region=env.get(ENV_AWS_REGION) or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            hnsw_ef_search=_int(env, ENV_HNSW_EF_SEARCH, 100),
            exact_scan_max_rows=_int(env, ENV_EXACT_SCAN_MAX_ROWS, 10_000),
            max_file_bytes=_int(env, ENV_MAX_FILE_BYTES, 512 * 1024 * 1024),
            auth_mode=_choice(env, ENV_AUTH_MODE, AUTH_MODES, "keys"),
            db_pool_size=_int(env, ENV_DB_POOL_SIZE, 8),
            inline_max_bytes=_int(env, ENV_INLINE_MAX_BYTES, 1024 * 1024),
            max_request_bytes=_int(env, ENV_MAX_REQUEST_BYTES, 10 * 1024 * 1024),
            processing_lease_s=_float(env, ENV_PROCESSING_LEASE_S, 300.0),
            processing_max_attempts=_int(env, ENV_PROCESSING_MAX_ATTEMPTS, 3),
            expired_retention_s=_float(env, ENV_EXPIRED_RETENTION_S, 86_400.0),
            poll_after_ms=_int(env, ENV_POLL_AFTER_MS, 500),
            bucket=env.get(ENV_BUCKET) or None,
            ingest_queue=env.get(ENV_INGEST_QUEUE) or None,
            embed_queue=env.get(ENV_EMBED_QUEUE) or None,
            embed_batch_chunks=_int(env, ENV_EMBED_BATCH_CHUNKS, 64),
            max_receives=_int(env, ENV_MAX_RECEIVES, 5),
            database_secret_arn=env.get(ENV_DATABASE_SECRET_ARN) or None,
            auto_migrate=_choice(env, ENV_AUTO_MIGRATE, ("true", "false", "1", "0"), "true") in ("true", "1"),
            chat_provider=_choice(env, ENV_CHAT_PROVIDER, CHAT_PROVIDERS, "openai"),
            chat_base_url=env.get(ENV_CHAT_BASE_URL) or None,
            chat_api_key=env.get(ENV_CHAT_API_KEY) or None,
            chat_model_routes=env.get(ENV_CHAT_MODEL_ROUTES) or None,
            chat_timeout_s=_float(env, ENV_CHAT_TIMEOUT_S, 120.0),
            chat_max_retries=_int(env, ENV_CHAT_MAX_RETRIES, 2),
            summary_model=env.get(ENV_SUMMARY_MODEL) or None,
            summary_threshold_tokens=_int(env, ENV_SUMMARY_THRESHOLD_TOKENS, 8000),
            summary_keep_turns=_int(env, ENV_SUMMARY_KEEP_TURNS, 4),
        )


def _choice(env: dict[str, str] | os._Environ[str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = (env.get(name) or default).strip().lower()
    if value not in choices:
        raise InvalidRequestError(f"{name}={value!r} is not one of {', '.join(choices)}.", param=name)
    return value


def _int(env: dict[str, str] | os._Environ[str], name: str, default: int | None) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidRequestError(f"{name} must be an integer, got {raw!r}.", param=name) from None


def _float(env: dict[str, str] | os._Environ[str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidRequestError(f"{name} must be a number, got {raw!r}.", param=name) from None


@functools.cache
def settings() -> Settings:
    """The process's settings, read from the environment on first call and cached."""
    return Settings.from_env()
