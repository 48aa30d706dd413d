"""The offline embedder side by side: ONNX Runtime int8 and fp32 (``LocalEmbedder``) against the PyTorch path it
replaced (sentence-transformers on torch, the same bundled all-MiniLM-L6-v2 weights), on NFCorpus chunks.

Chunks are made as ``retrieval.py`` makes them: each document of ``corpus.jsonl`` as ``<id>.txt`` (title, blank
line, text), parsed and chunked with the default strategy for the model's WordPiece tokenizer (8,571 chunks of
≤ 254 tokens for the 3,633 documents).

* speed — an evenly spaced sample of ``--sample`` chunks, embedded by every variant once per round for ``--rounds``
  rounds, the variants' order rotating each round so that no variant always runs first (interleaved); reported
  as the median chunks/s over the rounds, and the ratio of medians to the torch path; also chunks per CPU
  second of the process (all its threads), which other load on a shared machine disturbs less. Two call patterns: one
  ``embed`` call with the whole sample ("batched") and one call per document ("per-file", as
  ``ingest.pipeline`` calls it). Model load time (first call) is reported apart. ``--batch-sizes`` and
  ``--threads`` repeat the ONNX variants with other settings (the tuning behind ``local.DEFAULT_BATCH_SIZE`` and
  ``DEFAULT_THREADS``).
* agreement — every chunk of every document (``--agreement-docs`` to limit) embedded by each ONNX variant and by
  torch; the cosine of the two vectors per chunk, min and mean, and per document the smallest cosine over its
  chunks (target: ≥ 0.99 for every document). The torch vectors take minutes (≈ 15-40 chunks/s on 2 cores):
  ``--torch-cache FILE`` keeps them (numpy ``.npy``, keyed by the chunk texts' sha256) for later runs.

The torch variant runs only if ``sentence_transformers`` is importable (``pip install -e ".[compare]"``);
without it the ONNX variants are measured alone. Prints a table, then one JSON line.

    ./dev python benchmarks/embed.py                                  # speed only, ONNX variants
    ./dev python benchmarks/embed.py --agreement --torch-cache /tmp/torch-nfcorpus.npy
    cd benchmarks && python embed.py --sample 128 --rounds 3 --batch-sizes 8,16,32 --threads 1,2
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np

from common import SHARED_DATA

from chalicelib.embed.local import DEFAULT_BATCH_SIZE, DEFAULT_THREADS, LocalEmbedder, default_model_path
from chalicelib.ingest.chunk import chunk_document, resolve_chunking_strategy
from chalicelib.ingest.parse import parse_document

TARGET_SPEEDUP = 3.0
TARGET_COSINE = 0.99
TORCH_BATCH_SIZE = 32  # what the PyTorch LocalEmbedder used (sentence-transformers' encode batch_size)


class TorchEmbedder:
    """The PyTorch path as ``chalicelib/embed/local.py`` ran it before ONNX Runtime: sentence-transformers on CPU,
    ``max_seq_length`` from the folder, ``encode(batch_size=32, normalize_embeddings=True)``."""

    model = "torch"

    def __init__(self, model_path: Path) -> None:
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(str(model_path), device="cpu")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """n texts → n × 384 L2-normalised floats."""
        return self._model.encode(list(texts), batch_size=TORCH_BATCH_SIZE, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False).tolist()


def torch_available() -> bool:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def nfcorpus_chunks(folder: Path, max_docs: int | None) -> list[tuple[str, list[str]]]:
    """``[(doc id, [chunk text, ...]), ...]`` in corpus order, chunked as ingestion does."""
    local = LocalEmbedder()
    strategy = resolve_chunking_strategy(None, embedder_max_tokens=local.max_input_tokens)
    out = []
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = (doc.get("title") or "").strip() + "\n\n" + (doc.get("text") or "").strip()
            parsed = parse_document(text.encode("utf-8"), f"{doc['_id']}.txt")
            out.append((doc["_id"], [c.text for c in chunk_document(parsed, strategy, local.tokenizer)]))
            if max_docs and len(out) >= max_docs:
                break
    return out


def speed_sample(docs: list[tuple[str, list[str]]], size: int) -> list[list[str]]:
    """Whole documents, evenly spaced through the corpus, until they hold ``size`` chunks (the last one cut)."""
    total = sum(len(c) for _, c in docs)
    needed = max(1, -(-size * len(docs) // max(1, total)))
    picked, count = [], 0
    for _, chunks in docs[:: max(1, len(docs) // needed)]:
        if count >= size:
            break
        picked.append(chunks[: size - count])
        count += len(picked[-1])
    return picked


@dataclass
class Variant:
    name: str
    build: Callable[[], Any]
    embedder: Any = None
    load_s: float = 0.0


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def timed_cpu(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all threads) of ``fn()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def embed_each(embedder: Any, docs: list[list[str]]) -> None:
    """One ``embed`` call per document (as ``ingest.pipeline`` calls it)."""
    for doc in docs:
        embedder.embed(doc)


def measure_speed(variants: list[Variant], sample: list[list[str]], rounds: int) -> dict[str, dict[str, Any]]:
    """Per variant, medians over ``rounds`` interleaved rounds: chunks per wall second (batched and per-file) and
    chunks per CPU second (batched; less sensitive to other load on a shared machine), and every round."""
    texts = [t for doc in sample for t in doc]
    runs: dict[str, dict[str, list[float]]] = {v.name: {"batched": [], "per_file": [], "cpu": []} for v in variants}
    for r in range(rounds):
        order = variants[r % len(variants):] + variants[: r % len(variants)]
        for v in order:
            wall, cpu = timed_cpu(functools.partial(v.embedder.embed, texts))
            runs[v.name]["batched"].append(len(texts) / wall)
            runs[v.name]["cpu"].append(len(texts) / cpu)
            runs[v.name]["per_file"].append(len(texts) / timed(functools.partial(embed_each, v.embedder, sample)))
        print(f"  round {r + 1}/{rounds} (batched/per-file/per CPU-s): " + ", ".join(
            f"{v.name} {runs[v.name]['batched'][-1]:.1f}/{runs[v.name]['per_file'][-1]:.1f}/"
            f"{runs[v.name]['cpu'][-1]:.1f}" for v in variants), flush=True)
    return {name: {"batched_chunks_per_s": round(statistics.median(m["batched"]), 1),
                   "per_file_chunks_per_s": round(statistics.median(m["per_file"]), 1),
                   "chunks_per_cpu_s": round(statistics.median(m["cpu"]), 1),
                   "batched_runs": [round(x, 1) for x in m["batched"]],
                   "per_file_runs": [round(x, 1) for x in m["per_file"]],
                   "cpu_runs": [round(x, 1) for x in m["cpu"]]} for name, m in runs.items()}


def texts_key(texts: list[str]) -> str:
    digest = hashlib.sha256()
    for t in texts:
        digest.update(hashlib.sha256(t.encode("utf-8")).digest())
    return digest.hexdigest()


def torch_vectors(texts: list[str], make: Callable[[], Any], cache: Path | None) -> np.ndarray:
    """The torch path's vectors for ``texts`` (n × 384), from ``cache`` when it holds exactly these texts."""
    key = texts_key(texts)
    meta = cache.with_suffix(".json") if cache else None
    if cache and meta and cache.exists() and meta.exists() and json.loads(meta.read_text())["key"] == key:
        return np.load(cache)
    started = time.perf_counter()
    vectors = np.asarray(make().embed(texts), dtype=np.float32)
    print(f"  torch: {len(texts)} chunks in {time.perf_counter() - started:.0f} s", flush=True)
    if cache and meta:
        np.save(cache, vectors)
        meta.write_text(json.dumps({"key": key, "chunks": len(texts)}))
    return vectors


def agreement(docs: list[tuple[str, list[str]]], onnx: list[Variant], reference: np.ndarray) -> dict[str, Any]:
    """Per ONNX variant: cosine to the torch vectors per chunk (min, mean) and per document (min over chunks)."""
    texts = [t for _, chunks in docs for t in chunks]
    owner = np.repeat(np.arange(len(docs)), [len(c) for _, c in docs])
    out = {}
    for v in onnx:
        started = time.perf_counter()
        vectors = np.asarray(v.embedder.embed(texts), dtype=np.float32)
        seconds = time.perf_counter() - started
        cos = np.sum(vectors * reference, axis=1)
        per_doc = np.full(len(docs), np.inf)
        np.minimum.at(per_doc, owner, cos)
        out[v.name] = {"chunks": len(texts), "docs": len(docs), "seconds": round(seconds, 1),
                       "chunk_cos_min": round(float(cos.min()), 4), "chunk_cos_mean": round(float(cos.mean()), 5),
                       "doc_cos_min": round(float(per_doc.min()), 4),
                       "docs_below_target": int(np.sum(per_doc < TARGET_COSINE)),
                       "worst_doc": docs[int(np.argmin(per_doc))][0]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=SHARED_DATA / "beir" / "nfcorpus")
    parser.add_argument("--sample", type=int, default=512, help="chunks in the speed sample")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved speed rounds (median reported)")
    parser.add_argument("--batch-sizes", default=str(DEFAULT_BATCH_SIZE), help="ONNX batch sizes, comma-separated")
    parser.add_argument("--threads", default=str(DEFAULT_THREADS), help="ONNX intra-op threads, comma-separated")
    parser.add_argument("--no-fp32", action="store_true", help="skip the ONNX fp32 variant")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch path even if installed")
    parser.add_argument("--agreement", action="store_true", help="cosine to torch on every chunk (needs torch)")
    parser.add_argument("--agreement-docs", type=int, default=None, help="limit the agreement run to N docs")
    parser.add_argument("--torch-cache", type=Path, default=None, help=".npy file for the torch vectors")
    args = parser.parse_args(argv)
    if not (args.corpus / "corpus.jsonl").exists():
        print(f"no corpus at {args.corpus} (expects BEIR corpus.jsonl)", file=sys.stderr)
        return 2
    with_torch = not args.no_torch and torch_available()
    model_path = default_model_path()

    docs = nfcorpus_chunks(args.corpus, None)
    sample = speed_sample(docs, args.sample)
    variants: list[Variant] = []
    for threads in (int(x) for x in args.threads.split(",")):
        for batch in (int(x) for x in args.batch_sizes.split(",")):
            for quantize in (True, False) if not args.no_fp32 else (True,):
                name = f"onnx-{'int8' if quantize else 'fp32'}/b{batch}/t{threads}"
                variants.append(Variant(name, functools.partial(LocalEmbedder, batch_size=batch, quantize=quantize,
                                                                threads=threads)))
    if with_torch:
        variants.append(Variant("torch", lambda: TorchEmbedder(model_path)))
    for v in variants:  # load = construct + first call (torch loads in the constructor, ONNX on first use)
        started = time.perf_counter()
        v.embedder = v.build()
        v.embedder.embed(["load the model"])
        v.load_s = time.perf_counter() - started
    n_chunks = sum(len(c) for _, c in docs)
    print(f"embed benchmark: {len(docs)} docs, {n_chunks} chunks; speed sample {sum(map(len, sample))} chunks in "
          f"{len(sample)} docs, {args.rounds} rounds; torch {'yes' if with_torch else 'not installed/skipped'}")
    speed = measure_speed(variants, sample, args.rounds)

    print(f"\n{'variant':22s} {'load s':>7s} {'batched/s':>10s} {'per-file/s':>11s} {'/CPU-s':>7s} {'× torch':>8s}")
    base = speed.get("torch")
    for v in variants:
        s = speed[v.name]
        ratio = (s["batched_chunks_per_s"] / base["batched_chunks_per_s"]) if base else float("nan")
        s["load_s"] = round(v.load_s, 2)
        s["speedup_batched"] = round(ratio, 2) if base else None
        s["speedup_per_file"] = round(s["per_file_chunks_per_s"] / base["per_file_chunks_per_s"], 2) if base else None
        print(f"{v.name:22s} {v.load_s:7.2f} {s['batched_chunks_per_s']:10.1f} {s['per_file_chunks_per_s']:11.1f} "
              f"{s['chunks_per_cpu_s']:7.1f} {'' if not base else f'{ratio:.2f}':>8s}")

    agree: dict[str, Any] = {}
    if args.agreement:
        if not with_torch:
            print("agreement needs the torch path: pip install -e '.[compare]'", file=sys.stderr)
            return 2
        subset = docs[: args.agreement_docs] if args.agreement_docs else docs
        torch_variant = next(v for v in variants if v.name == "torch")
        reference = torch_vectors([t for _, c in subset for t in c], lambda: torch_variant.embedder,
                                  args.torch_cache)
        onnx = [v for v in variants if v.name != "torch"]
        agree = agreement(subset, onnx, reference)
        print(f"\n{'variant':22s} {'chunk cos min':>14s} {'mean':>8s} {'doc min':>8s} {'docs < 0.99':>12s}")
        for name, a in agree.items():
            print(f"{name:22s} {a['chunk_cos_min']:14.4f} {a['chunk_cos_mean']:8.5f} {a['doc_cos_min']:8.4f} "
                  f"{a['docs_below_target']:12d}")
    print(json.dumps({"benchmark": "embed", "docs": len(docs), "chunks": n_chunks,
                      "sample_chunks": sum(map(len, sample)), "rounds": args.rounds, "torch": with_torch,
                      "target_speedup": TARGET_SPEEDUP, "target_cosine": TARGET_COSINE, "speed": speed,
                      "agreement": agree}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
