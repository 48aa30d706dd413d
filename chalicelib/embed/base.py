"""The embedding port: what every embedder (HTTP, Bedrock, local model, hashing) offers the rest of Engram."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens the way an embedder reads them."""

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` as the embedder's tokenizer sees them, excluding special tokens."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    The four attributes are read-only members (properties here): an implementation may hold them as plain
    attributes of its own more specific types (a ``WordPieceTokenizer`` for ``tokenizer``) or compute them
    lazily (``OpenAIEmbedder.dimension`` probes the service once); callers never assign them.
    """

    @property
    def model(self) -> str:
        """Model id recorded on each vector store (e.g. ``"all-MiniLM-L6-v2"``)."""
        ...

    @property
    def dimension(self) -> int:
        """Length of every vector returned."""
        ...

    @property
    def max_input_tokens(self) -> int:
        """Tokens of content the model reads per input (special tokens excluded); text past this is silently
        dropped by the model, so chunks must not exceed it."""
        ...

    @property
    def tokenizer(self) -> Tokenizer:
        """Counts tokens in the same units as ``max_input_tokens``."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` (n strings) → n × ``dimension`` floats, L2-normalised, in input order.

        Raises:
            UpstreamError / UpstreamTimeoutError / RateLimitError: the service failed after retries.
            InvalidRequestError: the service rejected the input (e.g. too long).
        """
        ...
