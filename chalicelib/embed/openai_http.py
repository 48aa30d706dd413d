"""Embeddings from any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint (OpenAI, Azure-style gateways,
vLLM, Ollama, LiteLLM ...), over httpx, with batching, retries and translation into Engram's error tree.

Documented OpenAI limits this module respects (API reference, "Create embeddings", ``input``): each input at most
8192 tokens (we default to 8191, the limit OpenAI's embedding guide states for its models), not an empty string,
at most 2048 inputs per request, and at most 300,000 tokens summed over all inputs of one request.

Retry timing follows the official ``openai`` Python SDK (``_base_client._calculate_retry_timeout``): honour
``retry-after-ms`` then ``Retry-After`` (seconds or HTTP date) when it is in (0, 60] seconds, else back off
``min(0.5 · 2^attempt, 8)`` seconds times a jitter factor in (0.75, 1].
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from chalicelib.errors import InvalidRequestError, RateLimitError, UpstreamError, UpstreamTimeoutError
from chalicelib.http_retry import RETRYABLE_STATUS, backoff_s, retry_after_s, server_message

ENV_API_KEY = "ENGRAM_EMBEDDING_API_KEY"

# Native output length of OpenAI's embedding models (OpenAI embeddings guide, "Embedding models" table).
KNOWN_DIMENSIONS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}

# Max tokens per input for OpenAI's embedding models: 8191 in OpenAI's embeddings guide (models table); the API
# reference says 8192 — we take the smaller.
DEFAULT_MAX_INPUT_TOKENS = 8191
# Documented per-request limits (OpenAI API reference, "Create embeddings", ``input``).
OPENAI_MAX_BATCH_INPUTS = 2048
OPENAI_MAX_BATCH_TOKENS = 300_000

# What an empty input is sent as: the OpenAI API rejects "" with a 400, so we embed a single space instead
# (a valid, content-free vector) rather than failing a whole batch for one empty chunk or query.
EMPTY_INPUT_SUBSTITUTE = " "


_INVALID_INPUT_STATUS = frozenset({400, 413, 422})
_PROBE_TEXT = "dimension probe"

# A "piece" is a run of ASCII letters, one digit, or any other single non-space character (punctuation, each
# non-ASCII character). OpenAI's BPE vocabularies split digits into groups of ≤ 3 and rarely merge punctuation or
# non-ASCII characters with their neighbours, so counting each as a token over-estimates rather than under.
_PIECE = re.compile(r"[A-Za-z]+|\d|[^\sA-Za-z\d]")


class EstimatingTokenizer:
    """A conservative token count for BPE-tokenised remote models, computed locally with no downloads.

    ``count(text) = max(ceil(utf8_bytes / 3), pieces)`` where pieces are ASCII-letter runs, single digits and
    every other non-space character. English prose averages ~4 bytes per OpenAI token and code ~3, so the
    estimate is usually 10–40% above the true count: chunks sized with it stay under the model's limit.
    Pathological inputs (long emoji runs) can still be under-estimated; the server then answers 400, which
    surfaces as :class:`InvalidRequestError`. (tiktoken is not used: its vocabularies need a network download.)
    """

    def count(self, text: str) -> int:
        """Estimated tokens in ``text`` (special tokens excluded); 0 for ``""``."""
        if not text:
            return 0
        by_bytes = math.ceil(len(text.encode("utf-8")) / 3)
        if by_bytes <= 1:
            return by_bytes
        return max(by_bytes, len(_PIECE.findall(text)))


def l2_normalize(vector: Sequence[float]) -> list[float]:
    """``vector`` (dim floats) scaled to unit Euclidean length; an all-zero vector is returned unchanged."""
    norm = math.hypot(*vector)
    if norm == 0.0 or not math.isfinite(norm):
        return [float(x) for x in vector]
    return [float(x) / norm for x in vector]


class OpenAIEmbedder:
    """:class:`~chalicelib.embed.base.Embedder` over an OpenAI-compatible ``/embeddings`` endpoint.

    Args:
        client: an ``httpx.Client`` to send with (tests pass one with a ``MockTransport``); default: a new one.
        base_url: the API root, e.g. ``https://api.openai.com/v1``; requests go to ``{base_url}/embeddings``.
        api_key: sent as ``Authorization: Bearer``; None sends no header (local servers).
        model: model id sent to the server and recorded on vector stores.
        dimensions: ask for shortened vectors (text-embedding-3 only); also fixes :attr:`dimension`.
        max_input_tokens: tokens per input (default 8191, OpenAI's limit); what chunks must respect.
        timeout_s: per-request timeout, seconds.
        max_retries: retries after the first attempt on 408/429/5xx, timeouts and connection errors.
        max_batch_inputs / max_batch_tokens: per-request limits (defaults: OpenAI's 2048 inputs, 300k tokens,
            tokens as counted by :attr:`tokenizer`); lower them for servers with smaller limits.
        sleep: called with the wait in seconds between retries (tests inject a recorder).

    For a model outside ``KNOWN_DIMENSIONS`` without ``dimensions``, reading :attr:`dimension` (including via
    ``isinstance(x, Embedder)`` on Python 3.11, which probes attributes with ``hasattr``) makes one request.
    """

    def __init__(
        self,
        client: httpx.Client | None = None,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        dimensions: int | None = None,
        max_input_tokens: int | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 6,
        max_batch_inputs: int = OPENAI_MAX_BATCH_INPUTS,
        max_batch_tokens: int = OPENAI_MAX_BATCH_TOKENS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if dimensions is not None and dimensions <= 0:
            raise InvalidRequestError(f"Embedding dimensions must be positive, got {dimensions}.")
        if max_batch_inputs <= 0 or max_batch_tokens <= 0 or max_retries < 0:
            raise InvalidRequestError("Embedding batch limits must be positive and max_retries ≥ 0.")
        self.model = model
        self.max_input_tokens = max_input_tokens if max_input_tokens is not None else DEFAULT_MAX_INPUT_TOKENS
        self.tokenizer = EstimatingTokenizer()
        self._url = base_url.rstrip("/") + "/embeddings"
        self._api_key = api_key
        self._dimensions = dimensions
        self._dimension: int | None = dimensions if dimensions is not None else KNOWN_DIMENSIONS.get(model)
        self._timeout = httpx.Timeout(timeout_s)
        self._client = client if client is not None else httpx.Client(timeout=self._timeout)
        self._max_retries = max_retries
        self._max_batch_inputs = max_batch_inputs
        self._max_batch_tokens = max_batch_tokens
        self._sleep = sleep

    @property
    def dimension(self) -> int:
        """Vector length: ``dimensions`` if given, else the known model's, else learned by embedding one probe
        string on first access (may raise what :meth:`embed` raises)."""
        if self._dimension is None:
            self.embed([_PROBE_TEXT])
        assert self._dimension is not None
        return self._dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` (n strings) → n × :attr:`dimension` floats, L2-normalised, in input order.

        Inputs are split into requests of at most ``max_batch_inputs`` inputs and ``max_batch_tokens``
        estimated tokens; an empty string is sent as a single space (see ``EMPTY_INPUT_SUBSTITUTE``).

        Raises:
            RateLimitError: still 429 after ``max_retries`` retries.
            UpstreamTimeoutError: the last attempt timed out (``timeout_s`` seconds) or answered 408.
            UpstreamError: 5xx / connection failure after retries, a rejected API key (401/403), another
                unexpected status, or a malformed response.
            InvalidRequestError: the server rejected the input (400/413/422), with the server's message.
        """
        out: list[list[float]] = []
        for batch in self._batches([t if t else EMPTY_INPUT_SUBSTITUTE for t in texts]):
            out.extend(self._embed_batch(batch))
        return out

    def _batches(self, texts: list[str]) -> list[list[str]]:
        batches: list[list[str]] = []
        current: list[str] = []
        tokens = 0
        for text in texts:
            n = self.tokenizer.count(text)
            if current and (len(current) >= self._max_batch_inputs or tokens + n > self._max_batch_tokens):
                batches.append(current)
                current, tokens = [], 0
            current.append(text)
            tokens += n
        if current:
            batches.append(current)
        return batches

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        response = self._post_with_retries(body, headers)
        return self._parse(response, len(batch))

    def _post_with_retries(self, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = self._client.post(self._url, json=body, headers=headers, timeout=self._timeout)
            except httpx.TimeoutException as exc:
                if attempt >= self._max_retries:
                    raise UpstreamTimeoutError(
                        f"The embedding service at {self._url} did not answer within "
                        f"{self._timeout.read} s ({attempt + 1} attempts)."
                    ) from exc
            except httpx.TransportError as exc:
                if attempt >= self._max_retries:
                    raise UpstreamError(
                        f"Could not reach the embedding service at {self._url} ({attempt + 1} attempts): {exc}"
                    ) from exc
            else:
                if response.is_success:
                    return response
                if response.status_code not in RETRYABLE_STATUS or attempt >= self._max_retries:
                    raise self._status_error(response, attempt + 1)
                retry_after = retry_after_s(response.headers)
            self._sleep(retry_after if retry_after is not None else backoff_s(attempt))
            attempt += 1

    def _status_error(self, response: httpx.Response, attempts: int) -> Exception:
        status = response.status_code
        message, code = server_message(response)
        if status in _INVALID_INPUT_STATUS:
            return InvalidRequestError(
                f"The embedding service rejected the input (HTTP {status}): {message}", param="input", code=code
            )
        if status in (401, 403):
            return UpstreamError(
                f"The embedding API key was rejected by {self._url} (HTTP {status}): {message}. "
                f"Set {ENV_API_KEY} to a valid key for this service."
            )
        if status == 429:
            return RateLimitError(f"The embedding service is rate limiting us after {attempts} attempts: {message}")
        if status == 408:
            return UpstreamTimeoutError(f"The embedding service timed out (HTTP 408) after {attempts} attempts.")
        if status >= 500:
            return UpstreamError(f"The embedding service failed (HTTP {status}) after {attempts} attempts: {message}")
        return UpstreamError(f"The embedding service answered HTTP {status} for model {self.model!r}: {message}")

    def _parse(self, response: httpx.Response, expected: int) -> list[list[float]]:
        try:
            data = response.json()["data"]
            items = sorted(data, key=lambda item: item["index"])
            vectors = [item["embedding"] for item in items]
            indexes = [item["index"] for item in items]
        except (ValueError, KeyError, TypeError) as exc:
            raise UpstreamError(f"The embedding service at {self._url} returned a malformed response.") from exc
        if indexes != list(range(expected)):
            raise UpstreamError(
                f"The embedding service returned {len(vectors)} embeddings for {expected} inputs."
            )
        if not all(isinstance(v, list) and v for v in vectors):
            raise UpstreamError("The embedding service returned a non-float embedding (encoding_format ignored?).")
        dim = self._dimension if self._dimension is not None else len(vectors[0])
        bad = next((len(v) for v in vectors if len(v) != dim), None)
        if bad is not None:
            raise UpstreamError(f"The embedding model {self.model!r} returned {bad}-dim vectors, expected {dim}.")
        self._dimension = dim
        return [l2_normalize(v) for v in vectors]
