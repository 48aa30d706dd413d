"""The StreamingFront's startup script, run from the extracted code package the way Lambda Web Adapter runs it:
it must start the streaming front on AWS_LWA_PORT and answer the readiness check."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

from tests.processes import free_port

READY_TIMEOUT_S = 30.0


def test_startup_script_serves_the_readiness_check(code_zip: zipfile.ZipFile, tmp_path: Path) -> None:
    task_root = tmp_path / "task"
    code_zip.extractall(task_root)
    script = task_root / "streaming-front.sh"
    script.chmod(0o755)  # zipfile does not restore modes; Lambda does (test_template checks the zip's mode bits)
    port = free_port()
    # Lambda's PATH puts the runtime's python3 first; here the test interpreter's stands in for it.
    env = {**os.environ, "LAMBDA_TASK_ROOT": str(task_root), "AWS_LWA_PORT": str(port), "ENGRAM_METRICS": "off",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    process = subprocess.Popen([str(script)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert process.poll() is None, process.stderr.read().decode()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the streaming front never became ready"
                time.sleep(0.2)
        # The front runs from LAMBDA_TASK_ROOT (first on its path), i.e. the packaged code, not the checkout's.
        if sys.platform == "linux":
            assert os.readlink(f"/proc/{process.pid}/cwd") == str(task_root)
    finally:
        process.terminate()
        process.wait(timeout=10)
