"""Realistic chunk texts and keyword queries for the search benchmarks (``search.py``, ``api.py``,
``chroma_compare.py``), deterministic for a seed.

Source. The words of NFCorpus (``../shared/data/beir/nfcorpus/corpus.jsonl``: 3,633 medical abstracts, ~30k
distinct words) when present; else a synthetic Zipf vocabulary (so a clone without ``../shared`` still runs):
``SYNTHETIC_WORDS`` syllable words with probability ∝ rank^-``ZIPF_S`` (Zipf's law for English, s ≈ 1), grouped
into ``SYNTHETIC_DOCS`` "documents" of 150–300 words, each drawing half its words from 30 topic words of its own.

Chunks ("topic salad"). Each chunk has 80–160 words (uniform): a share ``TOPIC_SHARE`` drawn from one source
document (its topic, chosen uniformly) and the rest from the whole corpus's word distribution, with sentence breaks
every 15 words. So document frequencies follow the corpus (Zipf), and term frequencies within a chunk are bursty
like real text (a topic word recurs), which is what makes BM25 top-k hard or easy.

Queries. ``n``-word keyword queries: ``n`` words of one source document with ``n`` distinct lexemes (no Postgres
``english`` stop word, which the keyword leg drops), drawn by their frequency in it — what a user who knows the topic
types. NFCorpus' own query texts are available too (:attr:`Source.real_queries`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from common import SHARED_DATA

NFCORPUS = SHARED_DATA / "beir" / "nfcorpus"
MIN_WORDS, MAX_WORDS = 80, 160
TOPIC_SHARE = 0.7
SENTENCE_WORDS = 15
SYNTHETIC_WORDS = 30_000
SYNTHETIC_DOCS = 3_000
ZIPF_S = 1.0
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+")
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vi", "so", "pe", "du", "ga", "ho", "ji", "ze", "fu", "be",
              "an", "or", "el", "ut"]


@dataclass
class Source:
    """A corpus of source documents as word ids.

    Attributes:
        name: ``nfcorpus`` or ``zipf``.
        words: the vocabulary (word id → word), as a numpy object array.
        tokens: every document's word ids, concatenated (int32).
        offsets: document d is ``tokens[offsets[d]:offsets[d + 1]]`` (int64, length docs + 1).
        real_queries: NFCorpus query texts (empty for the synthetic source).
    """

    name: str
    words: np.ndarray
    tokens: np.ndarray
    offsets: np.ndarray
    real_queries: list[str]

    @property
    def documents(self) -> int:
        return len(self.offsets) - 1


def load_source(seed: int) -> Source:
    """NFCorpus' words when ``../shared`` has them, else the synthetic Zipf corpus for ``seed``."""
    if (NFCORPUS / "corpus.jsonl").exists():
        vocab: dict[str, int] = {}
        docs: list[list[int]] = []
        with open(NFCORPUS / "corpus.jsonl", encoding="utf-8") as fh:
            for line in fh:
                doc = json.loads(line)
                words = _WORD.findall(f"{doc.get('title', '')} {doc.get('text', '')}")
                if words:
                    docs.append([vocab.setdefault(w, len(vocab)) for w in words])
        queries: list[str] = []
        if (NFCORPUS / "queries.jsonl").exists():
            with open(NFCORPUS / "queries.jsonl", encoding="utf-8") as fh:
                queries = [q["text"] for q in map(json.loads, fh) if q.get("text", "").strip()]
        return _source("nfcorpus", list(vocab), docs, queries)
    rng = np.random.default_rng([seed, 11])
    words = []
    for i in range(SYNTHETIC_WORDS):  # distinct words of 2–4 syllables, short ones first (frequent words are short)
        word, j = "", i + len(_SYLLABLES)
        while j:
            j, r = divmod(j, len(_SYLLABLES))
            word += _SYLLABLES[r]
        words.append(word)
    p = np.arange(1, SYNTHETIC_WORDS + 1, dtype=np.float64) ** -ZIPF_S
    p /= p.sum()
    docs = []
    for _ in range(SYNTHETIC_DOCS):
        topic = rng.choice(SYNTHETIC_WORDS, 30, p=p)
        n = int(rng.integers(150, 301))
        own = rng.random(n) < 0.5
        docs.append(np.where(own, topic[rng.integers(0, 30, n)], rng.choice(SYNTHETIC_WORDS, n, p=p)).tolist())
    return _source("zipf", words, docs, [])


def _source(name: str, words: list[str], docs: list[list[int]], queries: list[str]) -> Source:
    tokens = np.fromiter((t for d in docs for t in d), dtype=np.int32)
    offsets = np.cumsum([0] + [len(d) for d in docs]).astype(np.int64)
    return Source(name, np.asarray(words, dtype=object), tokens, offsets, queries)


def chunk_texts(source: Source, seed: int, start: int, count: int) -> list[str]:
    """Texts of chunks ``start … start + count − 1`` (deterministic for ``seed`` and ``start``)."""
    rng = np.random.default_rng([seed, start, 3])
    total = len(source.tokens)
    topics = rng.integers(0, source.documents, count)
    lengths = rng.integers(MIN_WORDS, MAX_WORDS + 1, count)
    out = []
    for d, n in zip(topics, lengths):
        lo, hi = int(source.offsets[d]), int(source.offsets[d + 1])
        own = rng.random(n) < TOPIC_SHARE
        idx = np.where(own, lo + rng.integers(0, hi - lo, n), rng.integers(0, total, n))
        words = source.words[source.tokens[idx]]
        out.append(". ".join(" ".join(words[i:i + SENTENCE_WORDS]) for i in range(0, n, SENTENCE_WORDS)) + ".")
    return out


def keyword_queries(source: Source, seed: int, n_words: int, count: int,
                    lexemes: Callable[[list[str]], dict[str, str]]) -> list[str]:
    """``count`` queries of ``n_words`` words with distinct lexemes each, drawn by frequency from one source
    document (documents with fewer distinct lexemes are skipped). ``lexemes(words)`` maps each word that is not a
    stop word to its lexeme (the caller asks Postgres: ``to_tsvector('english', w)``)."""
    rng = np.random.default_rng([seed, n_words, 7])
    lexeme_of = lexemes(sorted(set(source.words.tolist())))
    out: list[str] = []
    while len(out) < count:
        d = int(rng.integers(0, source.documents))
        ids = source.tokens[source.offsets[d]:source.offsets[d + 1]]
        words = [w for w in source.words[ids] if w in lexeme_of]
        if len({lexeme_of[w] for w in words}) < n_words:
            continue
        chosen: dict[str, str] = {}  # lexeme → word; by frequency in the document, one word per lexeme
        while len(chosen) < n_words:
            w = words[int(rng.integers(0, len(words)))]
            chosen.setdefault(lexeme_of[w], w)
        out.append(" ".join(chosen.values()))
    return out
