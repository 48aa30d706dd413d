"""Lambda fitness: how long ``import app`` takes (the API function's init phase) and how big the deployment is.

Import time: ``python -X importtime -c "import app"`` in a fresh interpreter, ``--runs`` times (default 9), after
``compileall`` has written bytecode for app.py and chalicelib/ (Lambda has no writable cache, so the package must
ship it or pay compilation on every cold start; site-packages is already compiled by pip). Reported: the median
cumulative microseconds of ``app``, the median self time per top-level package (where the time goes), app's
direct imports by median cumulative time, and whether any model library (torch, sentence-transformers,
transformers) was imported.

Package size (``--sizes``, default on; needs PyPI for the layer unless ``--layer`` names a built one): the code
package from ``infra.build.synthesize`` (what every function runs) and the dependencies layer from
``infra.build.build_layer`` (requirements.txt for manylinux2014 x86_64 / CPython 3.11), unzipped, with the
layer's biggest top-level entries. A function's deployed size is code + layer (the streaming front adds the public
Lambda Web Adapter layer, ~5 MB, not ours).

Targets (issue 4): app import <= 300 ms on these machines; package <= 50 MB unzipped. Ends with one JSON line.

    .venv/bin/python benchmarks/coldstart.py [--runs 9] [--no-sizes] [--layer build/aws/dependencies-layer.zip]
"""

from __future__ import annotations

import argparse
import collections
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

IMPORT_TARGET_MS = 300.0
PACKAGE_TARGET_MB = 50.0
HEAVY_MODULES = ("torch", "sentence_transformers", "transformers")
_PROBE = ("import sys, time; t = time.process_time(); import app; cpu = time.process_time() - t; "
          "print(round(cpu * 1e6), ','.join(m for m in {heavy!r} if m in sys.modules))")


def import_profile() -> tuple[dict[str, tuple[int, int, int]], int, str]:
    """One ``-X importtime`` run of ``import app``: ``{module: (self µs, cumulative µs, depth)}`` for the modules
    this import loaded, the CPU time of the import (µs; less sensitive than wall time to other processes on a
    busy machine), and the comma-separated heavy modules it loaded (empty: none)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", _PROBE.format(heavy=HEAVY_MODULES)],
                          cwd=REPO, capture_output=True, text=True, check=True,
                          env={**os.environ, "ENGRAM_METRICS": "off"})
    modules: dict[str, tuple[int, int, int]] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|")
        depth = (len(name) - len(name.lstrip(" "))) // 2
        modules[name.strip()] = (int(self_us), int(cumulative_us), depth)
    cpu_us, _, loaded = done.stdout.strip().partition(" ")
    return modules, int(cpu_us), loaded


def measure_imports(runs: int) -> dict:
    """Medians over ``runs`` fresh interpreters (see the module doc)."""
    compileall.compile_file(str(REPO / "app.py"), quiet=1)
    compileall.compile_dir(str(REPO / "chalicelib"), quiet=1)
    totals, cpu, by_package, direct, heavy = [], [], collections.defaultdict(list), collections.defaultdict(list), set()
    for _ in range(runs):
        modules, cpu_us, loaded = import_profile()
        cpu.append(cpu_us)
        heavy.update(filter(None, loaded.split(",")))
        app_depth = modules["app"][2]
        totals.append(modules["app"][1])
        packages: collections.Counter[str] = collections.Counter()
        for name, (self_us, cumulative_us, depth) in modules.items():
            packages[name.split(".")[0]] += self_us
            if depth == app_depth + 1:
                direct[name].append(cumulative_us)
        for package, self_us in packages.items():
            by_package[package].append(self_us)
    ms = lambda values: round(statistics.median(values) / 1000, 1)
    return {
        "runs": runs,
        "app_ms_median": ms(totals),
        "app_ms_min": round(min(totals) / 1000, 1),
        "app_ms_max": round(max(totals) / 1000, 1),
        "app_cpu_ms_median": ms(cpu),
        "self_ms_by_package": dict(sorted(((p, ms(v)) for p, v in by_package.items()),
                                          key=lambda kv: -kv[1])[:15]),
        "app_direct_imports_ms": dict(sorted(((m, ms(v)) for m, v in direct.items()), key=lambda kv: -kv[1])[:10]),
        "heavy_modules_imported": sorted(heavy),
    }


def unzipped_bytes(archive: Path) -> int:
    """Sum of the uncompressed sizes of ``archive``'s members, bytes."""
    with zipfile.ZipFile(archive) as zf:
        return sum(info.file_size for info in zf.infolist())


def biggest_entries(archive: Path, depth: int, top: int = 8) -> dict[str, float]:
    """The ``top`` largest path prefixes of ``depth`` components in ``archive``, MB unzipped."""
    sizes: collections.Counter[str] = collections.Counter()
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            sizes["/".join(info.filename.split("/")[:depth])] += info.file_size
    return {name: round(size / 1e6, 1) for name, size in sizes.most_common(top)}


def measure_sizes(layer: Path | None) -> dict:
    """Build the code package (offline) and, unless ``layer`` is given, the layer (PyPI); report their sizes."""
    from infra import build

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        build.synthesize(out)
        code = unzipped_bytes(out / build.CODE_ZIP)
        layer_zip = layer or build.build_layer(out)
        layer_bytes = unzipped_bytes(layer_zip)
        return {
            "code_package_mb": round(code / 1e6, 2),
            "layer_mb": round(layer_bytes / 1e6, 1),
            "layer_zipped_mb": round(layer_zip.stat().st_size / 1e6, 1),
            "function_total_mb": round((code + layer_bytes) / 1e6, 1),
            "layer_biggest_mb": biggest_entries(layer_zip, depth=2),
        }


def main() -> None:
    """Parse arguments, measure, print a report and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--no-sizes", action="store_true", help="skip the package build (needs no PyPI)")
    parser.add_argument("--layer", type=Path, help="an already built dependencies-layer.zip to measure")
    args = parser.parse_args()
    result = {"imports": measure_imports(args.runs)}
    imports = result["imports"]
    print(f"import app: median {imports['app_ms_median']} ms (min {imports['app_ms_min']}, "
          f"max {imports['app_ms_max']}, {args.runs} runs; target <= {IMPORT_TARGET_MS:.0f} ms); "
          f"CPU time median {imports['app_cpu_ms_median']} ms")
    print("  self time by top-level package (ms):", imports["self_ms_by_package"])
    print("  app's direct imports, cumulative (ms):", imports["app_direct_imports_ms"])
    print("  model libraries imported:", imports["heavy_modules_imported"] or "none")
    if not args.no_sizes:
        sizes = result["sizes"] = measure_sizes(args.layer)
        print(f"code package: {sizes['code_package_mb']} MB unzipped (every function)")
        print(f"dependencies layer: {sizes['layer_mb']} MB unzipped ({sizes['layer_zipped_mb']} MB zipped)")
        print(f"per function: {sizes['function_total_mb']} MB unzipped (target <= {PACKAGE_TARGET_MB:.0f} MB; "
              f"Lambda's limit 250 MB)")
        print("  biggest in the layer (MB):", sizes["layer_biggest_mb"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
