"""How search latency grows with the store: a table and a figure from ``search.py --json`` results of several
sizes (issue 33 §1: 10k, 100k and 1M chunks, both backends).

Reads one or more JSON files written by ``search.py --backend pgvector,qdrant --json FILE`` (each may hold several
sizes), takes for every size and backend the ``all`` case's p50 and p95 of the vector leg, the keyword legs and
hybrid search (2 and 12 words), and the "engine" legs (Qdrant's hybrid query sent straight to the engine), prints
a Markdown table of them with each figure's growth from the previous size, draws p50 against size on log-log
axes into a PNG with ``--out`` (matplotlib: ``pip install -e ".[plots]"``, requirements-plots.txt), and ends with
one JSON line of the p50s.

    cd benchmarks && python growth_plot.py /tmp/search-10k-100k.json /tmp/search-1m.json \\
        --out ../docs/search-growth.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LEGS = ("vector", "kw 2w", "kw 12w", "hybrid 2w", "hybrid 12w", "engine 2w", "engine 12w")
PLOTTED = ("vector", "hybrid 2w", "hybrid 12w", "engine 12w")
STYLE = {"pgvector": "tab:blue", "qdrant": "tab:orange"}
MARKER = {"vector": "o", "hybrid 2w": "s", "hybrid 12w": "^", "engine 12w": "x"}


def collect(paths: list[Path]) -> dict[str, dict[int, dict[str, dict[str, float]]]]:
    """``{backend: {size: {leg: {"p50_ms", "p95_ms"}}}}`` of the ``all`` case, the last file winning per size."""
    out: dict[str, dict[int, dict[str, dict[str, float]]]] = {}
    for path in paths:
        report = json.loads(Path(path).read_text())
        for size, result in report["sizes"].items():
            for backend, figures in result.get("backends", {}).items():
                legs = figures.get("cases", {}).get("all", {})
                if legs:
                    out.setdefault(backend, {})[int(size)] = {leg: {"p50_ms": legs[leg]["p50_ms"],
                                                                    "p95_ms": legs[leg]["p95_ms"]}
                                                              for leg in LEGS if leg in legs}
    return out


def table(data: dict[str, dict[int, dict[str, dict[str, float]]]]) -> str:
    """Markdown: one row per backend and leg, p50 / p95 per size and the p50's growth (×) from the size before."""
    sizes = sorted({n for per in data.values() for n in per})
    head = "| backend | leg | " + " | ".join(f"{n:,} p50 / p95 ms" for n in sizes) + " | p50 growth |"
    lines = [head, "|" + "---|" * (len(sizes) + 3)]
    for backend, per in data.items():
        for leg in LEGS:
            cells, p50s = [], []
            for n in sizes:
                got = per.get(n, {}).get(leg)
                cells.append(f"{got['p50_ms']:.3g} / {got['p95_ms']:.3g}" if got else "—")
                p50s.append(got["p50_ms"] if got else None)
            if all(v is None for v in p50s):
                continue
            growth = " → ".join(f"{b / a:.1f}×" for a, b in zip(p50s, p50s[1:]) if a and b)
            lines.append(f"| {backend} | {leg} | " + " | ".join(cells) + f" | {growth or '—'} |")
    return "\n".join(lines)


def plot(data: dict[str, dict[int, dict[str, dict[str, float]]]], out: Path, title: str) -> None:
    """p50 against chunks, log-log, a line per backend and plotted leg."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    for backend, per in data.items():
        for leg in PLOTTED:
            points = sorted((n, legs[leg]["p50_ms"]) for n, legs in per.items() if leg in legs)
            if len(points) < 2:
                continue
            ax.plot([n for n, _ in points], [v for _, v in points], marker=MARKER[leg], color=STYLE.get(backend),
                    linestyle="--" if leg.startswith("engine") else "-", label=f"{backend} {leg}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("chunks in the store (log)")
    ax.set_ylabel("p50 latency, ms (log)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+", type=Path, help="search.py --json files")
    parser.add_argument("--out", type=Path, default=None, help="write the figure here (PNG)")
    parser.add_argument("--title", default="Search latency by store size (benchmarks/search.py, in-process)")
    args = parser.parse_args()
    data = collect(args.results)
    if not data:
        parser.error("no 'all' case in the results")
    print(table(data))
    if args.out:
        plot(data, args.out, args.title)
        print(f"figure: {args.out}", file=sys.stderr)
    print(json.dumps({"benchmark": "growth", "figure": str(args.out) if args.out else None,
                      "p50_ms": {b: {str(n): {leg: v["p50_ms"] for leg, v in legs.items()} for n, legs in per.items()}
                                 for b, per in data.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
