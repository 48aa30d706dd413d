"""Scheduled lanes for a process without the event pump (``engram serve --no-pump``, the test servers): a daemon
thread that runs each lane of the jobs table (:mod:`chalicelib.jobs.table`) at its tick, like EventBridge would, through
the same runner (:func:`chalicelib.jobs.runner.run_lane`). With the pump running, the pump fires the lanes instead."""

from __future__ import annotations

import logging
import threading
import time

from chalicelib.config import Settings

__all__ = ["LocalScheduler"]

logger = logging.getLogger("engram.scheduler")


class LocalScheduler:
    """Fires every lane every ``tick_s(lane) / speedup`` seconds (the first time one tick after :meth:`start`, as
    a new EventBridge rule does); :meth:`stop` ends it."""

    def __init__(self, settings: Settings, *, speedup: float = 1.0) -> None:
        self._settings = settings
        self._speedup = max(speedup, 1e-6)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engram-scheduler", daemon=True)

    def start(self) -> LocalScheduler:
        """Start the thread; returns self."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop firing; waits up to ``timeout_s`` seconds for a lane in progress."""
        self._stopping.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        from chalicelib.jobs import runner
        from chalicelib.jobs.table import LANES, tick_s

        due = {lane.name: time.monotonic() + tick_s(lane.name) / self._speedup for lane in LANES}
        while not self._stopping.is_set():
            name, when = min(due.items(), key=lambda item: item[1])
            if self._stopping.wait(max(0.0, when - time.monotonic())):
                return
            try:
                runner.run_lane(self._settings, name)
            except Exception:  # a lane failing must not stop the others
                logger.exception("lane %s failed", name)
            due[name] = time.monotonic() + tick_s(name) / self._speedup
