"""An embedder that is down: every call raises, as a failing embedding service would (after its retries)."""

from __future__ import annotations

from collections.abc import Sequence

from chalicelib import deps


class BrokenEmbedder:
    """Stands in for ``deps.embedder()`` with the same model, dimension and tokenizer (so stores and scopes accept
    it), but :meth:`embed` raises ``RuntimeError("embedding service down")``."""

    def __init__(self) -> None:
        working = deps.embedder()
        self.model, self.dimension = working.model, working.dimension
        self.max_input_tokens, self.tokenizer = working.max_input_tokens, working.tokenizer

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Never returns.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("embedding service down")
