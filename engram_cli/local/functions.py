"""Per-function Lambda settings from the Chalice project (``.chalice/config.json``): the stage and each handler's
``lambda_timeout``, so the local stack sets visibility timeouts and the pump reports deadlines as deployed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from chalice.config import Config
from chalice.constants import DEFAULT_LAMBDA_TIMEOUT, DEFAULT_STAGE_NAME

PROJECT_DIR = Path(__file__).resolve().parents[2]  # the repository root, where app.py and .chalice/ live


@dataclass(frozen=True)
class FunctionSettings:
    """``stage`` (Chalice stage; deployed function names are ``<app>-<stage>-<handler>``) and ``timeouts_s``
    (handler name → ``lambda_timeout`` seconds, for the handlers the config names)."""

    stage: str = DEFAULT_STAGE_NAME
    timeouts_s: dict[str, int] = field(default_factory=dict)

    def timeout_s(self, handler_name: str) -> int:
        """The handler's Lambda timeout in seconds (Chalice's default, 60, when the config sets none)."""
        return self.timeouts_s.get(handler_name, DEFAULT_LAMBDA_TIMEOUT)


def read_function_settings(handler_names: list[str], project_dir: Path = PROJECT_DIR,
                           stage: str | None = None) -> FunctionSettings:
    """Resolve ``lambda_timeout`` for ``handler_names`` with Chalice's own lookup (stage's ``lambda_functions`` →
    stage → top-level ``lambda_functions`` → top level). ``stage``: as given, else ``dev`` when the config has it,
    else its first stage. A missing config gives the defaults."""
    try:
        data = json.loads((project_dir / ".chalice" / "config.json").read_text())
    except (OSError, ValueError):
        return FunctionSettings()
    stages = list(data.get("stages", {}))
    stage = stage or (DEFAULT_STAGE_NAME if DEFAULT_STAGE_NAME in stages or not stages else stages[0])
    timeouts = {}
    for name in handler_names:
        value = Config(chalice_stage=stage, function_name=name, config_from_disk=data).lambda_timeout
        if value is not None:
            timeouts[name] = int(value)
    return FunctionSettings(stage=stage, timeouts_s=timeouts)
