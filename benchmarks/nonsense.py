"""Nonsense queries for score studies: random dictionary words that no document answers.

The dictionary is the whole words of the offline embedder's WordPiece vocabulary (``vocab.txt`` of the bundled
all-MiniLM-L6-v2: lower-case ASCII letters only, at least 4 letters, no ``##`` pieces; 30,522 entries, about 20,000
of them such words), minus the words Postgres' ``english`` configuration drops as stop words. It is split in two:

- **corpus words** — dictionary words that occur in at least 2 documents of the corpus (so BM25 and the embedder
  both know them);
- **outside words** — dictionary words that occur in no document.

A query has 2, 3 or 4 words (uniformly); each word is a corpus word or an outside word with probability 1/2 each,
no word twice. ``random.Random(seed)`` drives every choice, so a seed always gives the same list for the same
corpus. Such a query may share a word with many documents, but no document is about its combination of words.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from pathlib import Path

import psycopg

MIN_LETTERS = 4
MIN_CORPUS_DF = 2
QUERY_WORDS = (2, 3, 4)
_WORD = re.compile(r"[a-z]+")


def dictionary(vocab: Path) -> list[str]:
    """The whole words of a WordPiece ``vocab.txt`` (one entry a line): lower-case letters, ≥ 4 of them, sorted."""
    words = set()
    for line in vocab.read_text(encoding="utf-8").splitlines():
        if len(line) >= MIN_LETTERS and line.isascii() and line.isalpha() and line.islower():
            words.add(line)
    return sorted(words)


def without_stop_words(conn: psycopg.Connection, words: list[str]) -> list[str]:
    """``words`` that Postgres' ``english`` configuration indexes (stop words removed), in the same order."""
    kept = {row[0] for row in conn.execute(
        "SELECT w FROM unnest(%s::text[]) AS w WHERE to_tsvector('english', w) <> ''::tsvector", (words,))}
    return [w for w in words if w in kept]


def split_dictionary(words: list[str], documents: Iterable[str]) -> tuple[list[str], list[str]]:
    """``(corpus words, outside words)`` of ``words`` for the corpus ``documents`` (see the module docstring)."""
    df: dict[str, int] = {}
    for text in documents:
        for word in set(_WORD.findall(text.lower())):
            df[word] = df.get(word, 0) + 1
    inside = [w for w in words if df.get(w, 0) >= MIN_CORPUS_DF]
    outside = [w for w in words if w not in df]
    return inside, outside


def nonsense_queries(inside: list[str], outside: list[str], count: int, seed: int) -> list[str]:
    """``count`` queries of random words (see the module docstring), the same for the same arguments."""
    rng = random.Random(seed)
    queries = []
    for _ in range(count):
        n = rng.choice(QUERY_WORDS)
        words: list[str] = []
        while len(words) < n:
            word = rng.choice(inside if rng.random() < 0.5 else outside)
            if word not in words:
                words.append(word)
        queries.append(" ".join(words))
    return queries


def default_vocab() -> Path:
    """The bundled embedder's ``vocab.txt``."""
    from chalicelib.embed.local import default_model_path

    return default_model_path() / "vocab.txt"
