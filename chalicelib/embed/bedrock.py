"""Embeddings from Amazon Titan Text Embeddings on Bedrock (``bedrock-runtime`` ``InvokeModel``), via boto3.

Titan v2 request/response (Bedrock user guide, "Amazon Titan Embeddings G1 - Text", V2 request): body
``{"inputText": str, "dimensions": 256|512|1024, "normalize": true}`` → ``{"embedding": [float, ...],
"inputTextTokenCount": int}``; one text per call; at most 8,192 tokens (and 50,000 characters) per input.
``amazon.titan-embed-text-v1`` (G1) takes only ``inputText`` and returns 1536 floats; we normalise those here.

boto3 is imported, and the client built, on the first :meth:`BedrockTitanEmbedder.embed`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chalicelib.embed.openai_http import EMPTY_INPUT_SUBSTITUTE, EstimatingTokenizer, l2_normalize
from chalicelib.errors import (
    ConfigurationError,
    InvalidRequestError,
    RateLimitError,
    UpstreamError,
    UpstreamTimeoutError,
)

DEFAULT_MODEL = "amazon.titan-embed-text-v2:0"
TITAN_V2_DIMENSIONS = (256, 512, 1024)  # accepted "dimensions" values (Bedrock user guide, Titan V2 request)
TITAN_V1_DIMENSION = 1536  # Titan Embeddings G1 - Text output length (Bedrock user guide)
TITAN_MAX_INPUT_TOKENS = 8192  # Titan Text Embeddings V2 (and G1) max tokens per input (Bedrock user guide)
DEFAULT_MAX_CONCURRENCY = 4  # parallel InvokeModel calls per embed(); boto3 clients are thread-safe

_THROTTLING = frozenset({"ThrottlingException", "TooManyRequestsException", "ServiceQuotaExceededException"})
_INVALID = frozenset({"ValidationException"})
_TIMEOUT = frozenset({"ModelTimeoutException"})
_AUTH = frozenset({"AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException"})


class BedrockTitanEmbedder:
    """:class:`~chalicelib.embed.base.Embedder` over Amazon Titan Text Embeddings (v2 by default) on Bedrock.

    Args:
        client: a boto3 ``bedrock-runtime`` client (tests pass one wrapped in a botocore Stubber); default: built
            lazily with botocore's ``standard`` retry mode (throttling and 5xx retried with backoff).
        model: Bedrock model id (``amazon.titan-embed-text-v2:0`` or ``amazon.titan-embed-text-v1``).
        dimensions: v2 output length, one of 256/512/1024 (default 1024); must be None or 1536 for v1.
        region: AWS region of the Bedrock endpoint.
        max_retries: retries after the first attempt (botocore ``total_max_attempts`` = max_retries + 1; its
            ``max_attempts`` would count retries only).
        timeout_s: connect and read timeout per call, seconds.
        max_input_tokens: optional lower chunking limit than Titan's 8192 tokens.
        max_concurrency: parallel calls per :meth:`embed` (Titan takes one text per call).

    Raises (constructor):
        ConfigurationError: unsupported ``dimensions`` for the model.
    """

    def __init__(
        self,
        client: Any = None,
        *,
        model: str = DEFAULT_MODEL,
        dimensions: int | None = 1024,
        region: str = "us-east-1",
        max_retries: int = 6,
        timeout_s: float = 60.0,
        max_input_tokens: int | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        self._v1 = model.startswith("amazon.titan-embed-text-v1")
        if self._v1:
            if dimensions not in (None, TITAN_V1_DIMENSION):
                raise ConfigurationError(
                    f"{model} returns {TITAN_V1_DIMENSION}-dim vectors; it cannot shorten them to {dimensions}.",
                    setting="ENGRAM_EMBEDDING_DIMENSIONS"
                )
            self.dimension = TITAN_V1_DIMENSION
        else:
            dim = 1024 if dimensions is None else dimensions
            if dim not in TITAN_V2_DIMENSIONS:
                raise ConfigurationError(
                    f"Titan v2 embedding dimensions must be one of {TITAN_V2_DIMENSIONS}, got {dim}.",
                    setting="ENGRAM_EMBEDDING_DIMENSIONS",
                )
            self.dimension = dim
        self.model = model
        self.max_input_tokens = max_input_tokens if max_input_tokens is not None else TITAN_MAX_INPUT_TOKENS
        self.tokenizer = EstimatingTokenizer()
        self._client = client
        self._region = region
        self._max_retries = max_retries
        self._timeout_s = timeout_s
        self._max_concurrency = max(1, max_concurrency)

    def _get_client(self) -> Any:
        if self._client is None:
            from chalicelib import aws

            self._client = aws.client("bedrock-runtime", self._region, timeout_s=self._timeout_s,
                                      retries=self._max_retries, max_pool_connections=max(10, self._max_concurrency))
        return self._client

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` (n strings) → n × ``dimension`` floats, L2-normalised, in input order.

        One ``InvokeModel`` per text, up to ``max_concurrency`` at a time; ``""`` is sent as a single space
        (Titan requires non-empty ``inputText``).

        Raises:
            RateLimitError: ThrottlingException after botocore's retries.
            InvalidRequestError: ValidationException (e.g. input too long), with Bedrock's message.
            UpstreamTimeoutError: ModelTimeoutException or a connect/read timeout (``timeout_s`` seconds).
            UpstreamError: anything else (denied credentials, 5xx after retries, malformed response).
        """
        if not texts:
            return []
        client = self._get_client()
        items = [t if t else EMPTY_INPUT_SUBSTITUTE for t in texts]
        if self._max_concurrency == 1 or len(items) == 1:
            return [self._embed_one(client, t) for t in items]
        with ThreadPoolExecutor(max_workers=min(self._max_concurrency, len(items))) as pool:
            return list(pool.map(lambda t: self._embed_one(client, t), items))

    def _body(self, text: str) -> str:
        if self._v1:
            return json.dumps({"inputText": text})
        return json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True})

    def _embed_one(self, client: Any, text: str) -> list[float]:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        try:
            response = client.invoke_model(
                modelId=self.model, body=self._body(text), contentType="application/json", accept="application/json"
            )
            payload = json.loads(response["body"].read())
        except ClientError as exc:
            raise _translate_client_error(exc, self.model) from exc
        except (ConnectTimeoutError, ReadTimeoutError) as exc:
            raise UpstreamTimeoutError(
                f"Bedrock did not answer within {self._timeout_s} s for {self.model}: {exc}"
            ) from exc
        except NoCredentialsError as exc:
            raise UpstreamError(
                "No AWS credentials found for Bedrock embeddings (set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                "AWS_SECRET_ACCESS_KEY, or run with an IAM role)."
            ) from exc
        except BotoCoreError as exc:
            raise UpstreamError(f"Could not reach Bedrock in {self._region}: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise UpstreamError(f"Bedrock returned a malformed response for {self.model}.") from exc
        vector = payload.get("embedding") if isinstance(payload, dict) else None
        if not isinstance(vector, list) or len(vector) != self.dimension:
            got = len(vector) if isinstance(vector, list) else "no"
            raise UpstreamError(f"Bedrock {self.model} returned {got} floats, expected {self.dimension}.")
        return l2_normalize(vector)


def _translate_client_error(exc: Any, model: str) -> Exception:
    """Map a botocore ``ClientError`` to Engram's error tree by its AWS error code."""
    error = exc.response.get("Error", {})
    code = error.get("Code", "")
    message = error.get("Message") or str(exc)
    if code in _THROTTLING:
        return RateLimitError(f"Bedrock is throttling {model} embeddings ({code}): {message}")
    if code in _INVALID:
        return InvalidRequestError(f"Bedrock rejected the embedding input for {model}: {message}", param="input")
    if code in _TIMEOUT:
        return UpstreamTimeoutError(f"Bedrock timed out embedding with {model}: {message}")
    if code in _AUTH:
        return UpstreamError(
            f"Bedrock refused access to {model} ({code}): {message}. Check the AWS credentials and that model "
            "access is enabled in this region."
        )
    return UpstreamError(f"Bedrock failed embedding with {model} ({code or 'unknown error'}): {message}")
