"""A fake OpenAI-compatible embedding service: a real HTTP server (stdlib ``ThreadingHTTPServer`` on
``127.0.0.1:<free port>``, in a background thread) answering ``POST /v1/embeddings``.

Vectors are deterministic per input text (SHA-256 seeded, L2-normalised), ``dimension`` long unless the request
asks for ``dimensions``. Outages are scripted:

- ``fake.fail_next(n, status=500)``: the next ``n`` requests answer ``status`` (with OpenAI's error envelope; 429s
  carry ``retry-after-ms: 1``), then the service recovers;
- ``fake.go_down(status=503)`` / ``fake.come_up()``: every request fails until told otherwise.

Speed is scripted too: ``fake.delay_per_input_s = 0.05`` makes each request take that long per text it embeds
(a slow model: time proportional to the chunk count).

``fake.requests`` counts requests, ``fake.failures`` the failed answers, ``fake.inputs`` the texts embedded.

Example::

    with FakeEmbeddingServer(dimension=64) as fake:
        embedder = OpenAIEmbedder(base_url=fake.base_url, api_key=None, model="fake-embed", dimensions=64)
        fake.fail_next(3, status=429)
        embedder.embed(["hello"])          # retried past the three 429s
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeEmbeddingServer", "vector_for"]


def vector_for(text: str, dimension: int) -> list[float]:
    """The fake's vector for ``text``: ``dimension`` floats from SHA-256(text, counter) in [-1, 1), L2-normalised."""
    values: list[float] = []
    counter = 0
    while len(values) < dimension:
        digest = hashlib.sha256(text.encode("utf-8") + counter.to_bytes(4, "big")).digest()
        values.extend(v / 2**31 for v in struct.unpack(">8i", digest))
        counter += 1
    values = values[:dimension]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


class FakeEmbeddingServer:
    """See the module docstring. Use as a context manager (starts and stops the server)."""

    def __init__(self, *, dimension: int = 64) -> None:
        self.dimension = dimension
        self.requests = 0
        self.failures = 0
        self.inputs: list[str] = []
        self.delay_per_input_s = 0.0
        self._lock = threading.Lock()
        self._fail_remaining = 0
        self._fail_status = 500
        self._down_status: int | None = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-embeddings", daemon=True)

    @property
    def base_url(self) -> str:
        """The ``/v1`` root to give an OpenAI-compatible client."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def fail_next(self, n: int, status: int = 500) -> None:
        """Answer the next ``n`` requests with HTTP ``status``, then recover."""
        with self._lock:
            self._fail_remaining, self._fail_status = n, status

    def go_down(self, status: int = 503) -> None:
        """Answer every request with HTTP ``status`` until :meth:`come_up`."""
        with self._lock:
            self._down_status = status

    def come_up(self) -> None:
        """End an outage started with :meth:`go_down` (and any pending :meth:`fail_next`)."""
        with self._lock:
            self._down_status, self._fail_remaining = None, 0

    def __enter__(self) -> FakeEmbeddingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _failure(self) -> int | None:
        with self._lock:
            self.requests += 1
            if self._down_status is not None:
                self.failures += 1
                return self._down_status
            if self._fail_remaining > 0:
                self._fail_remaining -= 1
                self.failures += 1
                return self._fail_status
            return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.path.rstrip("/") != "/v1/embeddings":
                    return self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                status = fake._failure()
                if status is not None:
                    headers = {"retry-after-ms": "1"} if status == 429 else {}
                    return self._send(status, {"error": {"message": f"scripted failure {status}",
                                                         "type": "server_error", "param": None, "code": None}},
                                      headers)
                request = json.loads(body)
                texts = request["input"] if isinstance(request["input"], list) else [request["input"]]
                dimension = int(request.get("dimensions") or fake.dimension)
                with fake._lock:
                    fake.inputs.extend(texts)
                if fake.delay_per_input_s > 0:
                    time.sleep(fake.delay_per_input_s * len(texts))
                data = [{"object": "embedding", "index": i, "embedding": vector_for(t, dimension)}
                        for i, t in enumerate(texts)]
                tokens = sum(len(t.split()) for t in texts)
                self._send(200, {"object": "list", "data": data, "model": request.get("model"),
                                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

        return Handler
