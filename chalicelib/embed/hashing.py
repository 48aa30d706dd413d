"""A deterministic feature-hashing embedder — FOR FAST TESTS ONLY, never a default.

It has no notion of meaning (synonyms are unrelated, word order beyond bigrams is lost); it exists so tests of
chunking, storage and search can run in milliseconds with no model, network or downloads, while still ranking
texts that share words above texts that do not.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

from chalicelib.errors import InvalidRequestError

DEFAULT_DIMENSION = 384  # same as the local all-MiniLM-L6-v2 model, so stores created in tests look alike
MAX_INPUT_TOKENS = 512  # arbitrary: the hashing embedder reads any length; this only shapes test chunking
BIGRAM_WEIGHT = 0.5  # bigrams count half a unigram: shared phrases help, shared words dominate

_WORD = re.compile(r"\w+")
_PIECE = re.compile(r"\w+|[^\w\s]")
_EMPTY_FEATURE = "\x00empty"  # hashed for texts without words, so every vector has unit length


class RegexTokenizer:
    """Counts word runs (``\\w+``) and single punctuation characters: the units :class:`HashingEmbedder` reads."""

    def count(self, text: str) -> int:
        """Number of word/punctuation pieces in ``text`` (0 for ``""``)."""
        return sum(1 for _ in _PIECE.finditer(text))


class HashingEmbedder:
    """Signed feature hashing of lower-cased word unigrams and bigrams into ``dimension`` buckets, L2-normalised.

    FOR FAST TESTS ONLY (see module docstring). Each feature is hashed with BLAKE2b (stable across processes,
    unlike ``hash()``): 8 bytes pick the bucket, one bit the sign (+1/−1), so collisions cancel on average.

    Args:
        dimension: vector length (default 384); the model id is ``f"hashing-{dimension}"``.
    """

    def __init__(self, dimension: int = DEFAULT_DIMENSION) -> None:
        if dimension <= 0:
            raise InvalidRequestError(f"Hashing embedder dimension must be positive, got {dimension}.")
        self.dimension = dimension
        self.model = f"hashing-{dimension}"
        self.max_input_tokens = MAX_INPUT_TOKENS
        self.tokenizer = RegexTokenizer()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` (n strings) → n × ``dimension`` floats, unit length, in input order. Never raises for
        string input; the same text always gives the same vector."""
        return [self._embed_one(text) for text in texts]

    def _embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dimension
        words = _WORD.findall(text.lower())
        features: list[tuple[str, float]] = [(w, 1.0) for w in words]
        features += [(f"{a} {b}", BIGRAM_WEIGHT) for a, b in zip(words, words[1:])]
        if not features:
            features = [(_EMPTY_FEATURE, 1.0)]
        for feature, weight in features:
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=9).digest()
            bucket = int.from_bytes(digest[:8], "little") % self.dimension
            vector[bucket] += weight if digest[8] & 1 else -weight
        norm = math.hypot(*vector)
        if norm == 0.0:  # every feature cancelled out: fall back to the empty-text direction
            return self._embed_one("") if features[0][0] != _EMPTY_FEATURE else vector
        return [x / norm for x in vector]
