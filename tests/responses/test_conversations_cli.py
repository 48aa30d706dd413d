"""``engram conversations`` end to end on real Postgres with the scripted fake chat model as ENGRAM_CHAT_MODEL's
backend: create, continue (message as an argument and on stdin; the history printed, then the answer), show,
list, and the mistakes that exit 2."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from chalicelib import config, deps
from engram_cli.main import app
from tests.fakes.chat_server import text


@pytest.fixture()
def cli(settings, fake, monkeypatch):
    env = {"DATABASE_URL": settings.database_url, "ENGRAM_EMBEDDING_PROVIDER": "hashing",
           "ENGRAM_TENANT": "cli-conversations", "ENGRAM_CHAT_BASE_URL": fake.base_url,
           "ENGRAM_CHAT_API_KEY": "sk-test", "ENGRAM_CHAT_MODEL": "fake-model", "ENGRAM_CHAT_MAX_RETRIES": "0"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config.settings.cache_clear()
    deps.reset()
    runner = CliRunner()

    def run(*args: str, code: int = 0, stdin: str | None = None) -> str:
        result = runner.invoke(app, list(args), input=stdin, catch_exceptions=False)
        assert result.exit_code == code, result.output
        return result.stdout

    yield run
    config.settings.cache_clear()
    deps.reset()


def test_conversation_commands_end_to_end(cli, fake):
    conversation = json.loads(cli("conversations", "create", "--metadata", "topic=boats", "--json"))
    conv_id = conversation["id"]
    assert conv_id.startswith("conv_") and conversation["metadata"] == {"topic": "boats"}

    fake.push(text("A fine name for a boat."))
    out = cli("conversations", "continue", conv_id, "My boat is called Wren.")
    assert "0 items" in out and "A fine name for a boat." in out and "My boat is called Wren." in out
    assert fake.requests[-1]["model"] == "fake-model"

    fake.push(text("Your boat is called Wren."))
    out = cli("conversations", "continue", conv_id, stdin="What is my boat called?\n")
    history, answer = out.split("What is my boat called?", 1)
    assert "2 items" in history and "My boat is called Wren." in history and "A fine name for a boat." in history
    assert "Your boat is called Wren." in answer
    assert fake.requests[-1]["messages"] == [
        {"role": "user", "content": "My boat is called Wren."}, {"role": "assistant", "content": "A fine name for a boat."},
        {"role": "user", "content": "What is my boat called?"}]

    fake.push(text("Answered by another model."))
    response = json.loads(cli("conversations", "continue", conv_id, "Which model?", "--model", "other-model",
                              "--json"))
    assert response["model"] == "other-model" and response["conversation"] == {"id": conv_id}
    assert fake.requests[-1]["model"] == "other-model"

    shown = json.loads(cli("conversations", "show", conv_id, "--json"))
    assert shown["id"] == conv_id and len(shown["items"]) == 6
    assert [i["role"] for i in shown["items"]] == ["user", "assistant"] * 3
    assert "Your boat is called Wren." in cli("conversations", "show", conv_id)
    listed = json.loads(cli("conversations", "list", "--json"))
    assert conv_id in [c["id"] for c in listed]
    assert conv_id in cli("conversations", "list")


def test_conversation_command_mistakes_exit_2(cli, fake, monkeypatch):
    conv_id = cli("conversations", "create").strip()
    cli("conversations", "continue", conv_id, stdin="   \n", code=2)  # nothing to send
    cli("conversations", "show", "conv_NotAnObject0000000000000", code=2)
    cli("conversations", "continue", "conv_NotAnObject0000000000000", "hi", code=2)
    cli("conversations", "show", "resp_123", code=2)
    cli("conversations", "create", "--metadata", "no-equals-sign", code=2)
    monkeypatch.delenv("ENGRAM_CHAT_MODEL")
    config.settings.cache_clear()
    cli("conversations", "continue", conv_id, "hi", code=2)  # no model configured and none given
    assert fake.requests == []
    assert json.loads(cli("conversations", "show", conv_id, "--json"))["items"] == []
