"""Lambda fitness: how long ``import app`` takes (the API function's init phase) and how big the deployment is.

Import time: ``python -X importtime -c "import app"`` in a fresh interpreter, ``--runs`` times (default 9), after
``compileall`` has written bytecode for app.py and chalicelib/ (Lambda has no writable cache, so the package must
ship it or pay compilation on every cold start; site-packages is already compiled by pip). Reported: the median
cumulative microseconds of ``app``, the median self time per top-level package (where the time goes), app's
direct imports by median cumulative time, and whether any model library (torch, sentence-transformers,
transformers) was imported.

Package size (default on; needs PyPI for the layers unless ``--layers`` names a folder holding built ones): the code
package from ``infra.build.synthesize`` (every function runs it) and the two dependency layers from
``infra.build.build_layers`` (requirements.txt for manylinux2014 x86_64 / CPython 3.11: the dependencies layer
every function has, the parsers' layer only the functions that parse have), unzipped, with each layer's biggest
top-level entries; then **each function's size** (code + its layers, as the synthesized template gives them; the
streaming front's public Lambda Web Adapter layer, ~5 MB, is not ours and not counted), and ``import app`` in
each distinct deployed layout: a fresh ``python -I -S`` whose path is only the unpacked code package, the
function's layers and the AWS SDK (what Lambda's runtime provides), median of ``--runs``, both as shipped (the
bytecode the code package and the dependencies layer carry, ``infra.build.add_bytecode`` and what ``import app``
loads; nothing else is cached, as Lambda's file system is read-only) and with every module compiled beforehand.

Targets (issues 4 and 16): app import <= 300 ms on these machines; every function <= 50 MB unzipped. Ends with one
JSON line.

    .venv/bin/python benchmarks/coldstart.py [--runs 9] [--no-sizes] [--layers build/aws]
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
    totals: list[int] = []
    cpu: list[int] = []
    by_package: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
    direct: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
    heavy: set[str] = set()
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


def unpack(code_zip: Path, layer_zips: list[Path], dest: Path) -> list[str]:
    """Lay a function out as Lambda does under ``dest`` (created): the code package in ``task/`` (``/var/task``),
    the layers merged into ``opt/`` (``/opt``, later layers over earlier ones), and the AWS SDK the runtime
    provides (:data:`infra.build.RUNTIME_PROVIDED`, links to this interpreter's copies) in ``runtime/``. Returns
    the import path Lambda gives it, in order: ``task``, ``opt/python``, ``runtime``."""
    from infra import build

    task, opt, runtime = dest / "task", dest / "opt", dest / "runtime"
    with zipfile.ZipFile(code_zip) as zf:
        zf.extractall(task)
    for layer in layer_zips:
        with zipfile.ZipFile(layer) as zf:
            zf.extractall(opt)
    build.runtime_sdk(runtime)
    return [str(task), str(opt / "python"), str(runtime)]


_DEPLOYED_PROBE = ("import sys, time; sys.path[:0] = {paths!r}; w, c = time.perf_counter(), time.process_time(); "
                   "import app; print(round((time.perf_counter() - w) * 1e6), round((time.process_time() - c) * 1e6))")


def deployed_import(paths: list[str], runs: int, *, bytecode: bool) -> dict[str, float]:
    """Median wall and CPU milliseconds of ``import app`` over ``runs`` fresh ``python -I -S -B`` interpreters
    whose path is ``paths`` (:func:`unpack`) and the standard library: the shipped bytecode is read, none is
    written (Lambda's read-only file system). ``bytecode``: compile everything in ``paths`` first."""
    if bytecode:
        for path in paths[:2]:
            compileall.compile_dir(path, quiet=1, workers=1)
    walls, cpus = [], []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", _DEPLOYED_PROBE.format(paths=paths)],
                              capture_output=True, text=True, check=True, env={**os.environ, "ENGRAM_METRICS": "off"})
        wall, cpu = done.stdout.split()
        walls.append(int(wall))
        cpus.append(int(cpu))
    return {"wall_ms_median": round(statistics.median(walls) / 1000, 1),
            "cpu_ms_median": round(statistics.median(cpus) / 1000, 1)}


def measure_sizes(layers: Path | None, runs: int) -> dict:
    """Build the code package and template (offline) and, unless ``layers`` (a folder holding both layer zips) is
    given, the layers (PyPI); report their sizes, each function's, and ``import app`` per deployed layout."""
    from infra import build

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        template = json.loads(build.synthesize(out).read_text())
        code_zip = out / build.CODE_ZIP
        code = unzipped_bytes(code_zip)
        if layers is None:
            built = build.build_layers(out)
            zips = {path.name: path for path in built.values()}
        else:
            zips = {name: layers / name for name in build.LAYER_ZIPS.values()}
        layer_bytes = {name: unzipped_bytes(path) for name, path in zips.items()}
        functions = build.function_layers(template)
        per_function = {name: round((code + sum(layer_bytes[z] for z in used)) / 1e6, 1)
                        for name, used in sorted(functions.items())}
        imports = {}
        for index, used in enumerate(sorted({tuple(used) for used in functions.values()})):
            paths = unpack(code_zip, [zips[z] for z in used], out / f"layout{index}")
            imports[" + ".join(["code", *used])] = {
                "as_shipped": deployed_import(paths, runs, bytecode=False),
                "all_compiled": deployed_import(paths, runs, bytecode=True)}
        return {
            "code_package_mb": round(code / 1e6, 2),
            "layers_mb": {name: round(size / 1e6, 1) for name, size in layer_bytes.items()},
            "layers_zipped_mb": {name: round(path.stat().st_size / 1e6, 1) for name, path in zips.items()},
            "function_mb": per_function,
            "max_function_mb": max(per_function.values()),
            "deployed_import_app_ms": imports,
            "layer_biggest_mb": {name: biggest_entries(path, depth=2) for name, path in zips.items()},
        }


def main() -> None:
    """Parse arguments, measure, print a report and one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--no-sizes", action="store_true", help="skip the package build (needs no PyPI)")
    parser.add_argument("--layers", type=Path, help="a folder holding already built layer zips to measure")
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
        sizes = result["sizes"] = measure_sizes(args.layers, args.runs)
        print(f"code package: {sizes['code_package_mb']} MB unzipped (every function)")
        for name, size in sizes["layers_mb"].items():
            print(f"layer {name}: {size} MB unzipped ({sizes['layers_zipped_mb'][name]} MB zipped); biggest (MB):",
                  sizes["layer_biggest_mb"][name])
        for name, size in sizes["function_mb"].items():
            verdict = "ok" if size <= PACKAGE_TARGET_MB else "OVER"
            print(f"function {name}: {size} MB unzipped (target <= {PACKAGE_TARGET_MB:.0f} MB: {verdict})")
        for layout, timing in sizes["deployed_import_app_ms"].items():
            print(f"import app deployed ({layout}): as shipped {timing['as_shipped']['wall_ms_median']} ms "
                  f"(CPU {timing['as_shipped']['cpu_ms_median']}), every module compiled "
                  f"{timing['all_compiled']['wall_ms_median']} ms (CPU {timing['all_compiled']['cpu_ms_median']}); "
                  f"target <= {IMPORT_TARGET_MS:.0f} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
