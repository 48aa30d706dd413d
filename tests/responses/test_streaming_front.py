"""The true-streaming front for ``POST /v1/responses`` (``stream: true``): served by ``engram serve``'s local
server and by the standalone WSGI server (what the Lambda Web Adapter runs), driven by the official ``openai`` SDK
against the scripted fake model. "Incremental" is proven with a gated fake reply: the first text delta must reach
the client while the fake model is still holding back the rest of its answer."""

from __future__ import annotations

import threading

import httpx
import openai
import pytest

from chalicelib.api import streaming_front
from tests.fakes.chat_server import error, text

# Seconds after which a held model reply is released even if the client never saw its first delta.
RELEASE_AFTER_S = 8


def first_delta_while_model_holds(client: openai.OpenAI, fake, configure) -> tuple[list[str], str]:
    """Stream one response whose model reply pauses after its first word until the client has seen that word;
    returns (event types, final text). Fails if the first ``response.output_text.delta`` only arrives after the
    model was released by the safety timer (i.e. the front buffered the answer)."""
    configure(chat_timeout_s=30)  # the backend must outwait the hold, or a buffered answer would still arrive
    gate = threading.Event()
    timer = threading.Timer(RELEASE_AFTER_S, gate.set)  # never hang the suite
    timer.start()
    fake.push(text("Streaming arrives word by word.", gate=gate, gate_after=1))
    types: list[str] = []
    deltas: list[str] = []
    final = ""
    released_by_client = False
    try:
        with client.responses.create(model="fake-model", input="Say something.", stream=True) as stream:
            for event in stream:
                types.append(event.type)
                if event.type == "response.output_text.delta":
                    deltas.append(event.delta)
                if event.type == "response.output_text.delta" and not gate.is_set():
                    assert event.delta.strip() == "Streaming"
                    released_by_client = True
                    gate.set()  # only now may the model finish
                if event.type == "response.completed":
                    final = event.response.output_text
    finally:
        timer.cancel()
    assert released_by_client, "the first text delta only arrived after the model had finished"
    assert "".join(deltas) == final
    return types, final


def test_local_server_streams_events_incrementally(client, fake, configure):
    types, final = first_delta_while_model_holds(client, fake, configure)
    assert final == "Streaming arrives word by word."
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    assert types.count("response.output_text.delta") >= 2


def test_responses_stream_helper_gets_the_final_response(client, fake):
    fake.push(text("Helper answer."))
    with client.responses.stream(model="fake-model", input="hi") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Helper answer."
    assert final.status == "completed" and client.responses.retrieve(final.id).output_text == "Helper answer."


def test_no_backend_configured_is_an_error_envelope_before_the_stream(client, configure):
    configure(chat_base_url=None)
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="fake-model", input="hi", stream=True)
    assert info.value.status_code == 400 and info.value.code == "model_not_available"
    assert "ENGRAM_CHAT_BASE_URL" in info.value.message and info.value.param == "model"


def test_unknown_previous_response_is_404_before_the_stream(client):
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="fake-model", input="hi", stream=True,
                                previous_response_id="resp_0123456789abcdef0123456789abcdef")


def test_unknown_key_is_401(server):
    stranger = openai.OpenAI(base_url=server.url, api_key="sk-not-a-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        stranger.responses.create(model="fake-model", input="hi", stream=True)


def test_backend_failure_mid_response_is_a_failed_event(client, fake):
    fake.push(error(500, "model crashed"))
    with client.responses.create(model="fake-model", input="hi", stream=True) as stream:
        events = list(stream)
    assert events[-1].type == "response.failed"
    assert events[-1].response.error is not None


def test_standalone_wsgi_front_streams_incrementally(front, make_key, fake, configure):
    client = openai.OpenAI(base_url=front, api_key=make_key("acme"), max_retries=0, timeout=60,
                           _strict_response_validation=True)
    types, final = first_delta_while_model_holds(client, fake, configure)
    assert final == "Streaming arrives word by word." and types[-1] == "response.completed"


def test_standalone_front_answers_non_streaming_creates_and_health(front, make_key, fake):
    client = openai.OpenAI(base_url=front, api_key=make_key("acme"), max_retries=0, timeout=60,
                           _strict_response_validation=True)
    fake.push(text("Not streamed."))
    response = client.responses.create(model="fake-model", input="hi")
    assert response.output_text == "Not streamed." and response.status == "completed"
    root = front.removesuffix("/v1")
    health = httpx.get(f"{root}/health").json()
    assert health["status"] == "ok" and health["database"]["status"] == "ok"
    assert httpx.get(f"{root}/health/live").json() == {"status": "ok"}
    missing = httpx.get(f"{front}/files", headers={"Authorization": "Bearer x"})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "invalid_request_error"
    bad = httpx.post(f"{front}/responses", content=b"{not json", headers={"Authorization": "Bearer x"})
    assert bad.status_code == 401  # authentication comes first, as in the API
    assert "x-request-id" in bad.headers


def test_standalone_front_rejects_malformed_json(front, make_key):
    bad = httpx.post(f"{front}/responses", content=b"[1, 2]",
                     headers={"Authorization": f"Bearer {make_key('acme')}"})
    assert bad.status_code == 400 and bad.headers["x-should-retry"] == "false"
    assert bad.json()["error"]["message"] == "The request body must be a JSON object."


def test_wants_stream_picks_only_streamed_creates():
    assert streaming_front.wants_stream("POST", "/v1/responses", b'{"stream": true, "input": "x"}')
    assert streaming_front.wants_stream("POST", "/v1/responses/?x=1", b'{"stream": true}')
    assert not streaming_front.wants_stream("POST", "/v1/responses", b'{"stream": false}')
    assert not streaming_front.wants_stream("POST", "/v1/responses", b"not json")
    assert not streaming_front.wants_stream("POST", "/v1/responses", b"[" * 100_000 + b"]" * 100_000)
    assert not streaming_front.wants_stream("GET", "/v1/responses", b'{"stream": true}')
    assert not streaming_front.wants_stream("POST", "/v1/responses/resp_1/cancel", b'{"stream": true}')


def test_a_generator_that_breaks_ends_with_an_error_event_not_a_cut_off():
    def events():
        yield {"type": "response.created", "sequence_number": 0}
        raise RuntimeError("bug with a secret in it")

    blocks = list(streaming_front._encoded(events(), started=0.0))
    assert blocks[0].startswith(b"event: response.created\n")
    assert blocks[1].startswith(b"event: error\n") and b"secret" not in blocks[1]
    assert b'"sequence_number":1' in blocks[1] and b'"code":"server_error"' in blocks[1]


def test_standalone_front_refuses_query_parameters_like_the_api(front, make_key, fake):
    body = {"model": "fake-model", "input": "hi", "stream": True}
    typo = httpx.post(f"{front}/responses", params={"strem": "true"}, json=body,
                      headers={"Authorization": f"Bearer {make_key('acme')}"})
    assert typo.status_code == 400 and typo.json()["error"]["code"] == "unknown_parameter"
    assert typo.json()["error"]["param"] == "strem" and fake.requests == []
