"""The one error tree of Engram, rendered as OpenAI's error envelope at the HTTP edge.

Every error a caller can cause or see derives from :class:`EngramError`; each class fixes the HTTP status, the
OpenAI ``type`` and a default ``code``; an instance may name the offending request field in ``param``.
Foreign exceptions (psycopg, httpx, botocore, pypdf ...) are translated into this tree where they are caught,
with ``raise ... from exc``; domain code never catches driver exceptions.

    EngramError (500, server_error)
    ├── ConfigurationError (500; code misconfigured)   a setting is missing, malformed or contradictory
    │   └── EmbeddedDatabaseError (500)       the embedded Postgres cannot start (no package, foreign folder)
    ├── InvalidRequestError (400, invalid_request_error)
    │   ├── DocumentError (400; code unsupported_file | invalid_file)   a file that cannot be ingested
    │   └── EmbeddingMismatchError (400; code embedding_model_mismatch)
    ├── AuthenticationError (401)
    ├── PermissionDeniedError (403)
    ├── NotFoundError (404)
    ├── ConflictError (409)
    ├── FileContentError (410; code file_content_missing | file_content_changed)   a file's stored bytes are gone
    ├── PayloadTooLargeError (413)
    ├── RateLimitError (429)
    ├── UpstreamError (502)                   an embedding or chat service failed
    │   └── UpstreamTimeoutError (504)
    └── ServiceUnavailableError (503; Retry-After)   Engram cannot serve right now; retrying later may work
        └── DatabaseUnavailableError (503; code database_unavailable)   Postgres is unreachable or overloaded

The root subclasses Chalice's ``ChaliceUnhandledError`` because only those reach ``@app.middleware`` (chalice
``app.py`` ``_get_view_function_response``), which is where the envelope is written.
"""

from __future__ import annotations

from typing import Any

from chalice.app import ChaliceUnhandledError


class EngramError(ChaliceUnhandledError):
    """Base of all Engram errors: a message for the caller, plus status, OpenAI type, param and code."""

    status: int = 500
    type: str = "server_error"
    default_code: str | None = None
    # Seconds a client should wait before retrying (the ``Retry-After`` header of the response); None: no header.
    retry_after_s: int | None = None

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is not None else self.default_code

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI error envelope: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class ConfigurationError(EngramError):
    """500: the deployment is misconfigured (a setting is missing, malformed or names something that does not
    exist); the message names the environment variable to fix. Never the caller's fault, so never a 4xx."""

    default_code = "misconfigured"

    def __init__(self, message: str, *, setting: str | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.setting = setting  # the environment variable to fix, e.g. "ENGRAM_INGEST_QUEUE"


class InvalidRequestError(EngramError):
    """400: the request is malformed or names something that cannot be used; ``param`` names the field."""

    status = 400
    type = "invalid_request_error"


class DocumentError(InvalidRequestError):
    """A file Engram cannot ingest. ``code`` is OpenAI's vector-store-file ``last_error.code``:
    ``unsupported_file`` (a format we do not read) or ``invalid_file`` (damaged, encrypted, no text layer, too big)."""

    default_code = "invalid_file"


class UnsupportedFileError(DocumentError):
    """The file's type is not one Engram parses (see ``chalicelib.ingest.parse.SUPPORTED_EXTENSIONS``)."""

    default_code = "unsupported_file"


class EmbeddingMismatchError(InvalidRequestError):
    """A vector store was created with one embedding model/dimension and is asked to hold or search another."""

    default_code = "embedding_model_mismatch"


class AuthenticationError(EngramError):
    """401: missing or unknown API key."""

    status = 401
    type = "invalid_request_error"
    default_code = "invalid_api_key"


class PermissionDeniedError(EngramError):
    """403: the key is valid but may not do this."""

    status = 403
    type = "invalid_request_error"


class NotFoundError(EngramError):
    """404: no object with that id exists for the caller's tenant (other tenants' objects are 'not found' too)."""

    status = 404
    type = "invalid_request_error"
    default_code = "not_found"


class ConflictError(EngramError):
    """409: the object is in a state that forbids the operation (e.g. ambiguous store name)."""

    status = 409
    type = "invalid_request_error"
    default_code = "conflict"


class FileContentError(EngramError):
    """410: a file's record exists but its stored bytes do not (``file_content_missing``: the blob was deleted
    behind Engram's back, or lost with a storage that did not keep it) or are not what was uploaded
    (``file_content_changed``: their SHA-256 differs from the one recorded at upload). Permanent until the file is
    uploaded again, so a 4xx that clients do not retry (the OpenAI SDK retries 408, 409, 429 and 5xx); 410 Gone is
    HTTP's status for "no longer available and likely permanent" (RFC 9110 §15.5.11)."""

    status = 410
    type = "invalid_request_error"
    default_code = "file_content_missing"


class PayloadTooLargeError(EngramError):
    """413: the upload exceeds the configured limit (bytes)."""

    status = 413
    type = "invalid_request_error"
    default_code = "file_too_large"


class RateLimitError(EngramError):
    """429: an upstream or our own rate limit; retry later."""

    status = 429
    type = "rate_limit_error"
    default_code = "rate_limit_exceeded"


class UpstreamError(EngramError):
    """502: an external model service (embeddings, chat) failed after retries."""

    status = 502
    type = "server_error"
    default_code = "upstream_error"


class UpstreamTimeoutError(UpstreamError):
    """504: an external model service did not answer within its timeout (seconds, see Settings)."""

    status = 504
    default_code = "upstream_timeout"


class EmbeddedDatabaseError(ConfigurationError):
    """500: the embedded Postgres (used when ``DATABASE_URL`` is unset) cannot start: its package is not installed,
    or its data folder was made by another Postgres major version. The message says what to do; nothing is changed."""

    default_code = "embedded_database_unavailable"


# Seconds a client is told to wait (``Retry-After``) before retrying a request Engram could not serve for a passing
# reason. The openai SDK honours a Retry-After of up to 60 s (else its own backoff, 0.5 s doubling to 8 s) and retries
# twice by default: 2 s twice covers a database restart or a Lambda's reconnect (the embedded server restarts in
# ~0.1 s; a Postgres restart in seconds) without holding clients long. An Aurora failover takes ~30 s: clients that
# must ride it out raise their SDK's max_retries.
RETRY_AFTER_S = 2


class ServiceUnavailableError(EngramError):
    """503: Engram cannot serve the request right now for a reason expected to pass (the SDK retries 503s); the
    response carries ``Retry-After: retry_after_s`` (seconds, default :data:`RETRY_AFTER_S`)."""

    status = 503
    type = "server_error"
    default_code = "service_unavailable"
    retry_after_s: int | None = RETRY_AFTER_S


class DatabaseUnavailableError(ServiceUnavailableError):
    """503: Postgres could not be reached or used: a connection could not be made within
    ``ENGRAM_DB_CONNECT_TIMEOUT_S``, none was free within ``ENGRAM_DB_POOL_TIMEOUT_S``, or the server ended the
    session mid-request (restart, failover). Built from ``psycopg.OperationalError`` at the HTTP edge
    (:func:`chalicelib.api.middleware.database_unavailable`). A transaction the request had open is rolled back
    by the server (a session that ends never commits), so a unit of work is never half-written."""

    default_code = "database_unavailable"
