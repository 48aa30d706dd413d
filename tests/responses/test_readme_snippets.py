"""The README's tours run as written (``<!-- readme-test: NAME -->`` before a code block): the knowledge tour
(upload, store, search, ``file_search`` in a response), the memory tour (add, search, a conversation with memory
on), the SDK's ``responses.stream`` helper and the openai-agents SDK with memory on — against the local server and
the scripted local model the snippets name, with the real local embedding model (what a reader runs); only the
address and the key are replaced by the test server's. ``tests/test_readme.py`` checks that every code block of the
README is one of these."""

from __future__ import annotations

import ast
import dataclasses
import io
import re
from pathlib import Path

import httpx
import pytest

from chalicelib.chat.scripted import LABEL
from chalicelib.embed import build_embedder

pytestmark = pytest.mark.slow  # the real all-MiniLM-L6-v2

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ADDRESS, KEY = "http://127.0.0.1:8000/v1", "sk-engram-..."
# The snippets this module runs; tests/test_readme.py requires every python block of the README to be one.
TESTED = ("knowledge", "memory", "stream", "agents")


@pytest.fixture(scope="module")
def api_settings(api_settings):
    """The responses tests' settings with the bundled local embedding model, as ``./dev demo`` serves."""
    return dataclasses.replace(api_settings, embedding_provider="local", embedding_model="all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def hashing_embedder(api_settings):
    """Overrides the fast test embedder: the server of this module embeds with the real local model."""
    return build_embedder(api_settings)


def snippet(name: str) -> str:
    """The code block after ``<!-- readme-test: name -->``, dedented."""
    match = re.search(rf"<!-- readme-test: {name} -->\s*```python\n(.*?)```", README.read_text(encoding="utf-8"),
                      re.S)
    assert match, f"no README snippet {name!r}"
    lines = match.group(1).splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)


def run(code: str, server, key: str) -> list[str]:
    """Execute ``code`` against the test server; returns the lines it printed (its own ``print`` calls only: the
    in-process server logs to the same stdout from other threads)."""
    assert ADDRESS in code and KEY in code
    out = io.StringIO()

    def captured(*args, **kwargs) -> None:
        kwargs.pop("file", None)
        print(*args, file=out, **kwargs)

    exec(compile(code.replace(ADDRESS, server.url).replace(KEY, key), "README.md", "exec"), {"print": captured})
    return out.getvalue().splitlines()


def _remember(server, key: str) -> None:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        response = http.post("/memories", json={"messages": "Alice likes green tea", "user_id": "alice", "infer": False})
        assert response.status_code == 200, response.text


def _usage(line: str) -> dict:
    """A printed ``usage.memory`` dict."""
    return ast.literal_eval(line)


def test_the_knowledge_tour(server, make_key, monkeypatch):
    monkeypatch.chdir(ROOT)  # the snippet opens examples/docs/bm25.txt, as from a clone's root
    printed = run(snippet("knowledge"), server, make_key("readme-knowledge"))
    answer = printed.index(LABEL)
    hits = printed[:answer]
    assert hits and all(re.fullmatch(r"[01]\.\d{3} bm25\.txt: .+", line) for line in hits), hits
    assert printed[answer + 1] == "You asked: How are rare words weighted?"
    assert printed[answer + 2].startswith("The search found: ") and "inverse document frequency" in printed[answer + 2]


def test_the_memory_tour(server, make_key):
    printed = run(snippet("memory"), server, make_key("readme-memory"))
    found = ast.literal_eval(printed[0])
    assert found[0] == "I moved to Lisbon last year; I go hiking most weekends."
    turns = [i for i, line in enumerate(printed) if line == LABEL]
    assert len(turns) == 2
    first, second = printed[turns[0]:turns[1]], printed[turns[1]:]
    assert first[1] == "You asked: Where could I go hiking this weekend?"
    assert second[1] == "You asked: What could I cook for dinner tonight?"
    for turn, best in ((first, "I go hiking most weekends."), (second, "I love cooking Indian food.")):
        # recall put alice's most relevant memory first in front of the model
        assert turn[2] == "What I remember about you:" and turn[3].endswith(best), turn
        usage = _usage(turn[-1])
        assert usage["status"] == "completed" and usage["memories"] >= 1 and usage["memory_job_id"]


def test_the_stream_helper_snippet(server, make_key):
    key = make_key("readme-stream")
    _remember(server, key)
    printed = run(snippet("stream"), server, key)
    assert printed[:2] == [LABEL, "You asked: What do I like to drink?"]
    assert any(line.endswith(") Alice likes green tea") for line in printed)
    usage = _usage(printed[-1])
    assert usage["status"] == "completed" and usage["memories"] == 1


def test_the_agents_snippet(server, make_key):
    key = make_key("readme-agents")
    _remember(server, key)
    printed = run(snippet("agents"), server, key)
    turns = [i for i, line in enumerate(printed) if line == LABEL]
    assert len(turns) == 2
    assert printed[turns[0] + 1] == "You asked: What do I like to drink?"
    assert printed[turns[1] + 1] == "You asked: And to eat?"
    assert printed[turns[0] + 3].endswith(") Alice likes green tea")  # recalled for the drink question
    assert printed[turns[1] + 2] == "Nothing I remember about you was recalled for this."  # not for food: recall brings the relevant only


