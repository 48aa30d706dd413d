"""A Qdrant server for tests: a real HTTP server (stdlib ``ThreadingHTTPServer`` on ``127.0.0.1:<free port>``)
answering the REST endpoints Engram uses, each request body validated by ``qdrant-client``'s models of Qdrant's
OpenAPI specification (``qdrant_client.http.models``, ``extra="forbid"``: a field Qdrant would reject fails here),
and executed on the embedded engine (Qdrant Edge, through :class:`chalicelib.qdrant.edge.EdgeTransport`).

Answers are Qdrant's envelopes: ``{"result": ..., "status": "ok", "time": ...}``, and for errors ``{"status":
{"error": "..."}}`` with 400 (a body the models reject), 401 (a wrong ``api-key``), 404 (a missing collection).
``fake.fail(status, times)`` makes the next requests fail (retries); ``fake.requests`` records ``(method, path,
body)``.

Usage::

    with FakeQdrantServer(tmp_path, api_key="k") as fake:
        settings = dataclasses.replace(settings, qdrant_url=fake.url, qdrant_api_key="k")
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError
from qdrant_client.http import models

from chalicelib.qdrant.edge import EdgeTransport

_COLLECTION = re.compile(r"^/collections/(?P<name>[^/]+)(?P<rest>/.*)?$")
_POINTS = TypeAdapter(models.PointInsertOperations)
_SELECTOR = TypeAdapter(models.PointsSelector)


class FakeQdrantServer:
    """The fake (see the module docstring); a context manager. ``url`` is its REST root."""

    def __init__(self, root: Path, *, api_key: str | None = None) -> None:
        self.engine = EdgeTransport(Path(root))
        self.root = Path(root)
        self.api_key = api_key
        self.requests: list[tuple[str, str, Any]] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def fail(self, status: int, times: int = 1) -> None:
        """Answer the next ``times`` requests with ``status`` (Qdrant's error envelope)."""
        with self._lock:
            self._failures.extend([status] * times)

    def __enter__(self) -> FakeQdrantServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path = self.path.split("?", 1)[0]
                with fake._lock:
                    fake.requests.append((self.command, path, body))
                    failure = fake._failures.pop(0) if fake._failures else None
                if failure is not None:
                    return self._answer(failure, {"status": {"error": f"scripted failure {failure}"}})
                if fake.api_key is not None and self.headers.get("api-key") != fake.api_key:
                    return self._answer(401, {"status": {"error": "Must provide an API key or an Authorization "
                                                                  "bearer token"}})
                try:
                    status, result = fake._route(self.command, path, body)
                except ValidationError as error:
                    return self._answer(400, {"status": {"error": f"Format error in JSON body: {error}"}})
                if status != 200:
                    return self._answer(status, {"status": {"error": result}})
                return self._answer(200, {"result": result, "status": "ok", "time": 0.0001})

            do_GET = do_PUT = do_POST = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        self.engine.close()

    def _route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        match = _COLLECTION.match(path)
        if match is None:
            return 404, f"no route {method} {path}"
        name, rest = match["name"], match["rest"] or ""
        exists = (self.root / name).exists()
        if (method, rest) == ("GET", "/exists"):
            return 200, {"exists": exists}
        if (method, rest) == ("PUT", ""):
            create = models.CreateCollection.model_validate(body)
            if exists:
                return 409, f"Wrong input: Collection `{name}` already exists!"
            vectors = create.vectors
            assert isinstance(vectors, dict) and create.sparse_vectors is not None
            self.engine.ensure_collection(name, next(iter(vectors.values())).size)
            return 200, True
        if not exists:
            return 404, f"Not found: Collection `{name}` doesn't exist!"
        if (method, rest) == ("GET", ""):  # the fields of models.CollectionInfo Engram reads
            state = self.engine.status(name)
            assert state is not None
            return 200, {"status": "green" if state.built else "grey", "points_count": state.points,
                         "indexed_vectors_count": state.indexed_vectors, "segments_count": 1}
        if (method, rest) == ("PUT", "/index"):
            models.CreateFieldIndex.model_validate(body)
            return 200, {"operation_id": 0, "status": "completed"}
        if (method, rest) == ("PUT", "/points"):
            points = _POINTS.validate_python(body)
            assert isinstance(points, models.PointsList)
            self.engine.upsert(name, body["points"])
            return 200, {"operation_id": 1, "status": "completed"}
        if (method, rest) == ("POST", "/points/delete"):
            selector = _SELECTOR.validate_python(body)
            assert isinstance(selector, models.FilterSelector)
            self.engine.delete(name, body["filter"])
            return 200, {"operation_id": 2, "status": "completed"}
        if (method, rest) == ("POST", "/points/query/batch"):
            models.QueryRequestBatch.model_validate(body)
            answers = self.engine.query_batch(name, body["searches"])
            return 200, [{"points": [{"id": i, "version": 0, "score": s} for i, s in answer]} for answer in answers]
        if (method, rest) == ("POST", "/points/count"):
            models.CountRequest.model_validate(body)
            return 200, {"count": self.engine.count(name, body.get("filter") or {})}
        return 404, f"no route {method} {path}"
