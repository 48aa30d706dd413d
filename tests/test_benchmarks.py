"""Every benchmark script runs as documented: ``--help`` prints its usage and exits 0, and its smallest real mode
runs end to end and prints its numbers.

Smallest modes. Each script in ``benchmarks/`` with a ``__main__`` has an entry in :data:`SMALLEST`: the arguments
of its smallest real run — a few documents, queries, memories or files, the hashing embedder and the scripted fake
chat server where a model is involved — and a check of the JSON it ends with (figures present, numbers where
numbers belong). The script runs as a subprocess (``cwd`` ``benchmarks/``, as its docstring runs it) on the
session's database server (``database_url``: ``$DATABASE_URL`` or the embedded Postgres; each script makes its
own ``engram_bench_*`` databases there) with a data folder of this module (the embedded Qdrant, the local stack's
state). Nothing reads ``../shared/data``: the module writes a tiny BEIR folder (``corpus.jsonl``,
``queries.jsonl``, ``qrels_test.tsv``), a tiny LoCoMo file and a folder of mixed documents, and the scripts whose
defaults are the shared data get them by their options. ``search.py`` runs with ``--index-compare`` and
``--lengths``/``--baseline``, so ``index_compare.py`` and ``length_curve.py`` run too; ``nonsense.py`` and
``textgen.py`` run inside ``retrieval.py`` and ``search.py``.

What a smallest mode leaves out, and why:

* ``embed.py`` measures the real local model (ONNX Runtime) and nothing else: marked ``slow``.
* ``coldstart.py`` runs with ``--no-sizes``: the package-size part builds the dependency layers with pip from PyPI
  (tests/infra/test_layers.py builds and checks them, skipping without PyPI).
* ``chroma_compare.py`` needs ``chromadb``, which is no Engram dependency (its docstring installs it in a
  throwaway venv). The test runs the script with the interpreter in ``$CHROMA_PYTHON`` (else this one):
  without chromadb there it checks the script builds Engram's side and then says it skipped, exit 0, and the test
  is skipped.
* ``pipeline.py`` runs its ``fake`` embedder mode only (``local`` is the real model's speed); ``memory.py`` its
  four parts with the hashing embedder (``recall`` on the tiny LoCoMo file, the per-user curve at 20 and 60).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())
TIMEOUT_S = 300  # per script; the smallest modes take seconds


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 10 and all(p.name not in ("common.py", "__init__.py") for p in SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_runs(script: Path):
    run = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                         cwd=BENCHMARKS)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("usage:"), run.stdout[:300]


# ---------------------------------------------------------------------------------------------------- tiny data

TOPICS = {
    "vitamin": "vitamin deficiency bone density calcium supplements sunlight fracture elderly",
    "coffee": "coffee caffeine consumption cardiovascular risk blood pressure cups daily",
    "sleep": "sleep duration insomnia melatonin circadian rhythm night shift workers",
    "diabetes": "diabetes insulin glucose resistance obesity glycemic diet sugar",
    "cancer": "breast cancer tumor risk mammography screening chemotherapy survival",
    "exercise": "exercise physical activity aerobic training muscle strength endurance",
    "fish": "fish omega fatty acids mercury seafood intake pregnancy",
    "gut": "gut microbiome bacteria probiotics fiber intestinal inflammation",
}
FILLER = ("the", "study", "patients", "results", "group", "analysis", "data", "trial", "effect", "level",
          "associated", "increased", "reduced")


@pytest.fixture(scope="module")
def beir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BEIR folder of 40 short documents on 8 topics, 16 queries (2 per topic), every document of a query's
    topic relevant."""
    folder = tmp_path_factory.mktemp("beir")
    docs, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for t, (topic, words) in enumerate(TOPICS.items()):
        vocab = words.split()
        for i in range(5):
            sentences = [" ".join([vocab[(i + j + k) % len(vocab)] for k in range(4)] + list(FILLER[(i + j) % 8:][:5]))
                         for j in range(6)]
            docs.append({"_id": f"D{t}{i}", "title": f"{topic.title()} study {i}", "text": ". ".join(sentences) + "."})
        for q in range(2):
            queries.append({"_id": f"Q{t}{q}", "text": " ".join(vocab[q * 2:q * 2 + 3])})
            qrels += [f"Q{t}{q}\tD{t}{i}\t{2 if i == q else 1}" for i in range(5)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels_test.tsv").write_text("\n".join(qrels) + "\n")
    return folder


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of mixed small documents (text, Markdown, HTML, CSV, and a PDF that cannot be parsed)."""
    folder = tmp_path_factory.mktemp("documents")
    (folder / "notes.txt").write_text("Refunds take five business days.\n\nShipping is free above fifty euros.\n")
    (folder / "guide.md").write_text("# Setup\n\nInstall the agent, then point it at the server.\n\n## Keys\n\n"
                                     "Create an API key per tenant.\n")
    (folder / "page.html").write_text("<html><body><h1>Pricing</h1><p>The team plan costs ten euros a seat.</p>"
                                      "</body></html>")
    (folder / "table.csv").write_text("city,country\nLyon,France\nPorto,Portugal\n")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a PDF")
    return folder


@pytest.fixture(scope="module")
def locomo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoCoMo-shaped file (``locomo_shared.json``'s fields): one conversation of two sessions, a question of each
    category 1-4 with evidence, and one of category 5 (skipped by the benchmarks)."""
    said = [["I adopted a puppy called Biscuit last week.", "That is lovely, what breed is Biscuit?",
             "A beagle, he loves long walks by the river.", "I went hiking in the Alps in June.",
             "My sister Clara lives in Lisbon now.", "Do you still play the cello?"],
            ["I started a pottery class on Tuesdays.", "Clara visited me and we baked bread together.",
             "Biscuit chewed my new running shoes.", "I am training for the Berlin marathon in September.",
             "The cello is in storage since I moved.", "We should meet for coffee in Porto soon."]]
    conversation: dict[str, Any] = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for s, turns in enumerate(said, 1):
        conversation[f"session_{s}_date_time"] = f"1:{10 + s} pm on {s + 7} May, 2023"
        conversation[f"session_{s}"] = [{"speaker": "Ana" if i % 2 == 0 else "Ben", "dia_id": f"D{s}:{i + 1}",
                                         "text": text} for i, text in enumerate(turns)]
    qa = [{"question": "What is the name of Ana's puppy?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
          {"question": "When did Ana go hiking in the Alps?", "answer": "June", "evidence": ["D1:4"], "category": 2},
          {"question": "Who did Ana bake bread with?", "answer": "Clara", "evidence": ["D2:2", "D1:5"], "category": 1},
          {"question": "What instrument might Ben play?", "answer": "cello", "evidence": ["D1:6"], "category": 3},
          {"question": "What did Biscuit eat?", "answer": "shoes", "evidence": ["D2:3"], "category": 5}]
    path = tmp_path_factory.mktemp("locomo") / "locomo_tiny.json"
    path.write_text(json.dumps([{"sample_id": "conv-tiny", "conversation": conversation, "qa": qa}]))
    return path


# ---------------------------------------------------------------------------------------------------- running

@pytest.fixture(scope="module")
def bench_env(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The scripts' environment: the session's database server, a data folder of this module, the hashing embedder
    as the configured one, no EMF metrics, no model downloads, no chat model from the caller's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update({"DATABASE_URL": database_url, "ENGRAM_DATA_DIR": str(tmp_path_factory.mktemp("bench-data")),
                "ENGRAM_EMBEDDING_PROVIDER": "hashing", "ENGRAM_EMBEDDING_MODEL": "hashing-384",
                "ENGRAM_METRICS": "off", "POWERTOOLS_LOG_LEVEL": "WARNING", "HF_HUB_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false"})
    return env


def run_script(env: dict[str, str], script: str, *args: str) -> str:
    """Run ``benchmarks/<script> args`` to completion (exit 0); returns its stdout."""
    started = time.monotonic()
    run = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                         timeout=TIMEOUT_S, cwd=BENCHMARKS, env=env)
    assert run.returncode == 0, f"{script} exited {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"
    print(f"{script} {' '.join(args)}: {time.monotonic() - started:.1f} s")
    return run.stdout


def final_json(stdout: str) -> Any:
    """The JSON a script ended with: the whole output when it is one document (``--json`` of ``attach.py`` and
    ``pipeline.py`` indents it), else its last line."""
    out = stdout.strip()
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        return json.loads(out.rsplit("\n", 1)[-1])


def number(value: Any) -> bool:
    """A finite number (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def share(value: Any) -> bool:
    """A number in [0, 1] (recall, nDCG, a share of queries)."""
    return number(value) and 0 <= value <= 1


# Fixtures a smallest mode may name among its arguments: "{beir}" is replaced by that fixture's path.
@pytest.fixture(scope="module")
def search_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``results.json``, shaped as ``search.py --json`` writes it: two sizes, both backends."""
    folder = tmp_path_factory.mktemp("search-results")
    legs = {"vector": 1.0, "hybrid 2w": 5.0, "hybrid 12w": 8.0, "engine 12w": 2.0}
    sizes = {str(n): {"backends": {b: {"cases": {"all": {leg: {"p50_ms": ms * n / 1000 * (2 if b == "pgvector" else 1),
                                                               "p95_ms": 2 * ms * n / 1000}
                                                         for leg, ms in legs.items()}}} for b in ("pgvector", "qdrant")}}
             for n in (1000, 10000)}
    (folder / "results.json").write_text(json.dumps({"benchmark": "search", "sizes": sizes}))
    return folder


DATA = ("beir", "documents", "locomo", "search_results")


def check_api(r: dict[str, Any]) -> None:
    hybrid = r["modes"]["hybrid"]
    assert r["store_chunks"] == 500 and hybrid["same_results_as_in_process"] is True
    for key in ("in_process", "in_process_route_body", "http_sdk_1", "http_raw_1", "http_sdk_2"):
        assert number(hybrid[key]["p50_ms"]) and hybrid[key]["requests"] > 0, key
    assert number(hybrid["ratio_http_1_p50"]) and number(r["breakdown"]["round trip (SELECT 1)"]["p50_ms"])


def check_attach(r: list[dict[str, Any]]) -> None:
    assert [x["budget_s"] for x in r] == [0.01, 1e9]
    for x in r:
        assert x["files"] == x["completed"] == 5 and x["failed"] == 0 and x["single_status"] == "completed"
        assert number(x["request_s"]) and number(x["all_completed_s"]) and number(x["measured_chunks_per_s"])
    assert r[1]["inline_completed"] == 5  # an unbounded budget completes the batch inside the request


def check_chroma(r: dict[str, Any]) -> None:
    assert r["rows"] == 500 and len(r["rounds"]) == 1
    for key in ("engram_p50_ms", "chroma_p50_ms", "engram_insert_rows_s", "chroma_insert_rows_s", "query_ratio_p50"):
        assert number(r["median"][key]), key
    assert share(r["median"]["engram_recall@10"])


def check_coldstart(r: dict[str, Any]) -> None:
    imports = r["imports"]
    assert imports["runs"] == 1 and number(imports["app_ms_median"]) and imports["app_ms_median"] > 0
    assert imports["heavy_modules_imported"] == [] and "chalicelib" in imports["self_ms_by_package"]


def check_embed(r: dict[str, Any]) -> None:
    assert r["docs"] == 40 and r["sample_chunks"] > 0
    speed = r["speed"]["onnx-int8/b{}/t{}".format(*_onnx_defaults())]
    assert number(speed["batched_chunks_per_s"]) and speed["batched_chunks_per_s"] > 0


def _onnx_defaults() -> tuple[int, int]:
    from chalicelib.embed.local import DEFAULT_BATCH_SIZE, DEFAULT_THREADS

    return DEFAULT_BATCH_SIZE, DEFAULT_THREADS


def check_growth(r: dict[str, Any]) -> None:
    assert r["p50_ms"]["qdrant"]["10000"]["hybrid 12w"] == 80.0 and r["p50_ms"]["pgvector"]["1000"]["vector"] == 2.0


def check_ingest(r: dict[str, Any]) -> None:
    nf, docs = r["corpora"]["nfcorpus"], r["corpora"]["docs"]
    assert nf["parse"]["docs"] == 10 and nf["chunk"]["chunks"] >= 10 and number(nf["embed"]["chunks_per_s"])
    assert list(docs["parse"]["failed"]) == ["broken.pdf"]
    for corpus in (nf, docs):
        for run in ("hnsw", "qdrant"):
            store = corpus["store"][run]
            assert store["rows"] == corpus["chunk"]["chunks"] and number(store["rows_per_s"]), run
    assert isinstance(nf["store_target_met"], bool)


def check_keyword_profile(r: dict[str, Any]) -> None:
    assert r["size"] == 500
    for words in ("2w", "12w"):
        medians = r["medians_ms_and_counts"][words]
        assert number(medians["total"]) and medians["lists"] >= 1, words


def check_lifecycle(r: dict[str, Any]) -> None:
    assert r["memories"] > 0 and r["duplicates"] > 0 and r["model"].startswith("fake")
    passes = r["passes"]
    assert passes["archive_stale_memories"]["counts"]["archived"] == passes["archive_stale_memories"]["expected"]
    assert passes["enforce_memory_quotas"]["counts"]["quota_archived"] == passes["enforce_memory_quotas"]["expected"]
    assert passes["sweep_expired_memories"]["counts"]["deleted"] == passes["sweep_expired_memories"]["expected"]
    for name, p in passes.items():  # a repeated pass changes nothing
        assert all(number(s) for s in p["runs"]) and number(p["repeat_s"]), name
        assert sum(v for k, v in p["repeat_counts"].items() if k != "scopes") == 0, name
    assert r["duplicates_removed"]["pairs"] == r["duplicates"] and r["duplicates_removed"]["wrong_merges"] == 0
    assert r["locomo"]["questions"] == 4 and share(r["locomo"]["before"]["R@10"]) and share(r["locomo"]["after"]["R@10"])


def check_memory(r: dict[str, Any]) -> None:
    variants = r["recall"]["variants"]
    assert r["recall"]["questions"] == 4 and "default (all signals)" in variants and len(variants) > 5
    overall = variants["default (all signals)"]["metrics"]["overall"]
    assert all(share(overall[m]) for m in ("R@5", "R@10", "R@20", "All@10", "nDCG@10"))
    assert set(r["recall"]["backends"]) == {"qdrant"} and share(r["recall"]["backends"]["qdrant"]["top10_same_set"])
    for backend in ("pgvector", "qdrant"):  # one column per backend
        scale = r["scale"][backend]
        assert scale["memories"] == 100 and number(scale["add_memories_per_s"]) and number(scale["search_ms_p50"])
        curve = r["per_user"][backend]
        assert list(curve) == ["20", "60"] and all(number(row["p50_ms"]) for row in curve.values())
    overhead = r["overhead"]
    assert overhead["adds"] == 5 and overhead["model_calls_mean"] >= 1 and number(overhead["own_ms_p50"])


def check_outage(r: list[dict[str, Any]]) -> None:
    by = {(s["phase"], s["what"]): s for s in r}
    assert by[("up", "GET /v1/vector_stores #1")]["status"] == 200
    assert by[("down", "GET /v1/vector_stores (cached key)")]["status"] == 503
    assert by[("recovered", "GET /health")]["status"] == 200
    assert all(number(s["seconds"]) for s in r)


def check_pipeline(r: list[dict[str, Any]]) -> None:
    assert [(x["embedder"], x["workers"]) for x in r] == [("fake", 1)]
    assert r[0]["files"] == 3 and r[0]["failed"] == 0 and r[0]["chunks"] >= 3
    assert number(r[0]["ms_per_file"]) and number(r[0]["files_per_s"])


def check_responses_memory(r: dict[str, Any]) -> None:
    assert r["questions"] == 4 and r["memories"] > 0 and r["jobs"].get("completed", 0) > 0
    assert share(r["metrics"]["memories/search"]["overall"]["R@10"])
    assert number(r["recall_ms_p50"]) and number(r["added_ms_p50"]) and number(r["recall_to_search_p50"])


def check_retrieval(r: dict[str, Any]) -> None:
    assert r["docs"] == 40 and r["queries"] == 16 and r["nonsense_queries"] == 20
    for mode in ("vector", "keyword", "hybrid"):
        assert share(r[mode]["ndcg@10"]) and share(r[mode]["recall@100"]) and number(r[mode]["ms_per_query"]), mode
    assert r["keyword"]["ndcg@10"] > 0.5  # each query's words are its topic's: keyword search finds them


def check_search(r: dict[str, Any]) -> None:
    size = r["sizes"]["500"]
    assert set(size["backends"]) == {"pgvector", "qdrant"}
    for backend, figures in size["backends"].items():
        for case in ("all", "store 1%", "attr 1%"):
            legs = figures["cases"][case]
            assert number(legs["vector"]["p50_ms"]) and share(legs["vector"]["recall@10"]), (backend, case)
            assert number(legs["hybrid 12w"]["p50_ms"]), (backend, case)
    assert number(size["index_compare"]["all@10"]["halfvec"]["p50_ms"])
    curve = size["length_curve"]
    assert set(curve) == {"pgvector", "pgvector 0024", "qdrant"} and number(curve["pgvector"]["12"]["hybrid"]["p50_ms"])


# script → (arguments, check of its JSON). Arguments may name the module's data: "{beir}", "{documents}",
# "{locomo}".
SMALLEST: dict[str, tuple[list[str], Callable[[Any], None]]] = {
    "api.py": (["--chunks", "500", "--queries", "5", "--warmup", "2", "--clients", "2", "--duration", "0.5",
                "--modes", "hybrid", "--same-process", "--build-procs", "1", "--json"], check_api),
    "attach.py": (["--files", "5", "--budgets", "0.01,1e9", "--json"], check_attach),
    "chroma_compare.py": (["--size", "500", "--queries", "5", "--rounds", "1", "--insert-batch", "20"],
                          check_chroma),
    "coldstart.py": (["--runs", "1", "--no-sizes"], check_coldstart),
    "embed.py": (["--corpus", "{beir}", "--sample", "8", "--rounds", "1", "--no-fp32", "--no-torch"], check_embed),
    "growth_plot.py": (["{search_results}/results.json"], check_growth),
    "ingest.py": (["--nfcorpus", "{beir}", "--docs", "{documents}", "--max-docs", "10", "--embedder", "hashing",
                   "--store-runs", "hnsw,qdrant"], check_ingest),
    "keyword_profile.py": (["--size", "500", "--queries", "3"], check_keyword_profile),
    "lifecycle.py": (["--memories", "60", "--users", "3", "--fake-model", "--locomo", "{locomo}",
                      "--locomo-embedder", "hashing"], check_lifecycle),
    "memory.py": (["--locomo", "{locomo}", "--embedding-provider", "hashing", "--memories", "100", "--users", "4",
                   "--queries", "5", "--adds", "5", "--per-user", "--sizes", "20,60"], check_memory),
    "outage.py": (["--records", "1", "--hung-cap", "1", "--json"], check_outage),
    "pipeline.py": (["--corpus", "{beir}", "--modes", "fake", "--workers", "1", "--files", "3", "--docs-per-file",
                     "2", "--json"], check_pipeline),
    "responses_memory.py": (["--locomo", "{locomo}", "--conversations", "1"], check_responses_memory),
    "retrieval.py": (["{beir}", "--embedder", "hashing", "--nonsense", "20"], check_retrieval),
    "search.py": (["--sizes", "500", "--queries", "5", "--rounds", "1", "--check-queries", "3",
                   "--backend", "pgvector,qdrant", "--index-compare", "--lengths", "2,12", "--baseline", "0024"],
                  check_search),
}
# Only these load the real local model.
SLOW = frozenset({"embed.py"})


def test_every_script_has_a_smallest_mode():
    assert sorted(SMALLEST) == [p.name for p in SCRIPTS]


@pytest.fixture(scope="module")
def search_data(bench_env: dict[str, str]) -> None:
    """``search.py``'s data set of 500 rows (``keyword_profile.py`` and ``chroma_compare.py`` read it), loaded
    once."""
    run_script(bench_env, "search.py", "--sizes", "500", "--load-only")


@pytest.mark.parametrize("script", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name
                                    for name in SMALLEST])
def test_smallest_mode_runs(script: str, request: pytest.FixtureRequest, bench_env: dict[str, str]):
    args, check = SMALLEST[script]
    data = {name: str(request.getfixturevalue(name)) for name in DATA if any(f"{{{name}}}" in a for a in args)}
    if script in ("keyword_profile.py", "chroma_compare.py"):
        request.getfixturevalue("search_data")
    if script == "chroma_compare.py":
        python = os.environ.get("CHROMA_PYTHON", sys.executable)
        args = [*args, "--chroma-python", python]
    stdout = run_script(bench_env, script, *(a.format(**data) for a in args))
    if script == "chroma_compare.py" and "chromadb is not importable" in stdout:
        pytest.skip("chromadb is not importable (set CHROMA_PYTHON to an interpreter that has it)")
    check(final_json(stdout))
