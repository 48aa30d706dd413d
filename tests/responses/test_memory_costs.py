"""What memory costs a response, counted over real HTTP: recall embeds the user's message once (for memories and
earlier exchanges alike) and reads on the connection of the request's other reads — memory on takes no more
database connections than memory off (the pool's own request counter), and remembering shares the connection
that stores the response."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from chalicelib import deps
from chalicelib.embed.hashing import HashingEmbedder
from chalicelib.store import db
from tests.conftest import BOTH_BACKENDS
from tests.fakes.chat_server import text

VECTOR_BACKENDS = BOTH_BACKENDS  # users' memories on pgvector, then on Qdrant

class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting what it is asked to embed."""

    def __init__(self) -> None:
        super().__init__(dimension=384)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return super().embed(texts)


def _connections(settings) -> int:
    return db.pool(settings).get_stats()["requests_num"]


def test_memory_on_costs_one_embedding_and_no_extra_connection(make_client, make_key, server, fake, api_settings,
                                                               hashing_embedder):
    client = make_client("costs")
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {make_key('costs')}"},
                      timeout=60) as http:
        added = http.post("/memories", json={"messages": [{"role": "user", "content": "Lea plays the oboe"}],
                                             "user_id": "lea", "infer": False})
        assert added.status_code == 200, added.text
    fake.push(text("Warm-up."))
    client.responses.create(model="fake-model", input="warm up", store=False)  # keys and pools warm
    counting = CountingEmbedder()
    deps.set_embedder(counting)
    try:
        used = {}
        for name, memory in (("off", False), ("on", {"user_id": "lea", "remember": False, "exchanges": True,
                                                     "score_threshold": 0.0, "exchange_threshold": 0.0})):
            fake.push(text("The oboe."))
            before, embedded = _connections(api_settings), len(counting.texts)
            r = client.responses.create(model="fake-model", input="Which instrument does Lea play?",
                                        extra_body={"memory": memory})
            used[name] = (_connections(api_settings) - before, counting.texts[embedded:])
            assert r.status == "completed"
        assert used["off"] == (used["on"][0], [])
        assert used["on"][1] == ["Which instrument does Lea play?"]  # once, for memories and exchanges
        assert used["on"][0] <= 2  # the request's reads, then storing it
        assert r.usage.model_extra["memory"]["memories"] == 1
    finally:
        deps.set_embedder(hashing_embedder)
