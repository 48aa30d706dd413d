"""The README's memory snippets run as written (``<!-- readme-test: NAME -->`` before a code block): the SDK's
``responses.stream`` helper and the openai-agents SDK with memory on, against the local server and the scripted
fake model — only the address and the key are replaced by the test server's."""

from __future__ import annotations

import io
import re
from pathlib import Path

import httpx

from tests.fakes.chat_server import text

README = Path(__file__).resolve().parents[2] / "README.md"
ADDRESS, KEY = "http://127.0.0.1:8000/v1", "sk-engram-..."


def snippet(name: str) -> str:
    """The code block after ``<!-- readme-test: name -->``, dedented."""
    match = re.search(rf"<!-- readme-test: {name} -->\s*```python\n(.*?)```", README.read_text(encoding="utf-8"),
                      re.S)
    assert match, f"no README snippet {name!r}"
    lines = match.group(1).splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)


def run(code: str, server, key: str) -> str:
    """Execute ``code`` against the test server; returns what it printed (its own ``print`` calls only: the
    in-process server logs to the same stdout from other threads)."""
    assert ADDRESS in code and KEY in code
    out = io.StringIO()

    def captured(*args, **kwargs) -> None:
        kwargs.pop("file", None)
        print(*args, file=out, **kwargs)

    exec(compile(code.replace(ADDRESS, server.url).replace(KEY, key), "README.md", "exec"), {"print": captured})
    return out.getvalue()


def _remember(server, key: str) -> None:
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        response = http.post("/memories", json={"messages": "Alice likes green tea", "user_id": "alice",
                                                "infer": False})
        assert response.status_code == 200, response.text


def test_the_stream_helper_snippet(server, make_key, fake):
    key = make_key("readme-stream")
    _remember(server, key)
    fake.push(text("You like green tea."))
    printed = run(snippet("stream"), server, key).splitlines()
    assert printed[0] == "You like green tea."
    assert "'memories': 1" in printed[1] and "'status': 'completed'" in printed[1]
    assert "Alice likes green tea" in fake.requests[0]["messages"][0]["content"]


def test_the_agents_snippet(server, make_key, fake):
    key = make_key("readme-agents")
    _remember(server, key)
    fake.push(text("Green tea."), text("Something vegetarian."))
    printed = run(snippet("agents"), server, key).splitlines()
    assert printed == ["Green tea.", "Something vegetarian."]
    assert "Alice likes green tea" in fake.requests[0]["messages"][0]["content"]
    second = [m["content"] for m in fake.requests[1]["messages"] if m["role"] != "system"]
    assert second == ["What do I like to drink?", "Green tea.", "And to eat?"]
