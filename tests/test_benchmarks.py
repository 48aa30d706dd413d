"""Every benchmark script runs as documented: ``--help`` prints its usage and exits 0 (a script that cannot even
describe itself cannot be run from its docstring's command line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 10 and all(p.name not in ("common.py", "__init__.py") for p in SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_runs(script: Path):
    run = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                         cwd=BENCHMARKS)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("usage:"), run.stdout[:300]
