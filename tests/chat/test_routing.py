"""Model → backend routing by configuration, and the "no backend configured" error."""

from __future__ import annotations

import dataclasses

import pytest

from chalicelib import deps
from chalicelib.chat import routing
from chalicelib.chat.base import ChatMessage, ChatRequest
from chalicelib.chat.bedrock import BedrockBackend
from chalicelib.chat.openai_compat import OpenAICompatBackend
from chalicelib.config import Settings
from chalicelib.errors import EngramError, InvalidRequestError
from tests.fakes.chat_server import FakeChatServer, text


@pytest.fixture(autouse=True)
def fresh_cache():
    deps.reset()
    yield
    deps.reset()


def configured(**changes) -> Settings:
    return dataclasses.replace(Settings(), **changes)


def test_nothing_configured_names_the_settings():
    with pytest.raises(InvalidRequestError) as info:
        deps.chat_backend("gpt-4o-mini", configured(chat_base_url=None, chat_provider="openai"))
    error = info.value
    assert (error.status, error.param, error.code) == (400, "model", "model_not_available")
    assert "ENGRAM_CHAT_BASE_URL" in error.message and "ENGRAM_CHAT_PROVIDER=bedrock" in error.message


def test_base_url_gives_a_cached_openai_backend():
    settings = configured(chat_base_url="http://localhost:11434/v1")
    chat = deps.chat_backend("llama3.2", settings)
    assert isinstance(chat, OpenAICompatBackend)
    assert deps.chat_backend("qwen2.5", settings) is chat


def test_bedrock_provider_needs_no_url():
    assert isinstance(deps.chat_backend("amazon.nova-lite-v1:0", configured(chat_provider="bedrock")),
                      BedrockBackend)


def test_routes_first_match_wins_then_default_provider():
    settings = configured(chat_base_url="http://gw/v1", chat_provider="openai",
                          chat_model_routes="anthropic.*=bedrock, us.anthropic.*=bedrock ,gpt-*=openai")
    assert routing.provider_for(settings, "anthropic.claude-3-5-haiku-20241022-v1:0") == "bedrock"
    assert routing.provider_for(settings, "us.anthropic.claude-3-7-sonnet-20250219-v1:0") == "bedrock"
    assert routing.provider_for(settings, "gpt-4o") == "openai"
    assert routing.provider_for(settings, "Anthropic.claude") == "openai"  # case-sensitive; default provider
    assert isinstance(deps.chat_backend("anthropic.claude-v2", settings), BedrockBackend)
    assert isinstance(deps.chat_backend("llama3", settings), OpenAICompatBackend)


def test_route_to_openai_without_url_is_the_not_configured_error():
    settings = configured(chat_provider="bedrock", chat_model_routes="gpt-*=openai")
    assert isinstance(deps.chat_backend("amazon.nova-pro-v1:0", settings), BedrockBackend)
    with pytest.raises(InvalidRequestError, match="ENGRAM_CHAT_BASE_URL"):
        deps.chat_backend("gpt-4o", settings)


@pytest.mark.parametrize("routes", ["anthropic.*", "x=vertex", "=openai"])
def test_malformed_routes_are_a_server_misconfiguration(routes):
    with pytest.raises(EngramError, match="ENGRAM_CHAT_MODEL_ROUTES") as info:
        deps.chat_backend("m", configured(chat_base_url="http://gw/v1", chat_model_routes=routes))
    assert info.value.status == 500


def test_routed_backend_talks_to_the_configured_endpoint():
    with FakeChatServer([text("routed ok")]) as fake:
        settings = configured(chat_base_url=fake.base_url, chat_api_key="sk-route", chat_timeout_s=5)
        chat = deps.chat_backend("fake-model", settings)
        result = chat.complete(ChatRequest(model="fake-model", messages=[ChatMessage("user", "hi")]))
    assert result.text == "routed ok" and fake.headers[0]["authorization"] == "Bearer sk-route"
