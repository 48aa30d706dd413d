"""Tests of the embedders (chalicelib.embed): HTTP via httpx.MockTransport, Bedrock via botocore's Stubber,
hashing, the factory, and (marked slow) the real local all-MiniLM-L6-v2 model. No network."""

from __future__ import annotations

import dataclasses
import email.utils
import hashlib
import io
import json
import math
import random
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from chalicelib.config import Settings
from chalicelib.embed import Embedder, Tokenizer, build_embedder
from chalicelib.embed.bedrock import BedrockTitanEmbedder
from chalicelib.embed.hashing import HashingEmbedder
from chalicelib.embed.openai_http import EstimatingTokenizer, OpenAIEmbedder
from chalicelib.errors import (
    ConfigurationError,
    InvalidRequestError,
    RateLimitError,
    UpstreamError,
    UpstreamTimeoutError,
)

BASE = "https://embed.test/v1"
REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------- OpenAI HTTP


def fake_vector(text: str, dim: int = 4) -> list[float]:
    """A deterministic, un-normalised vector for ``text`` (so tests can check order and normalisation)."""
    digest = hashlib.blake2b(text.encode(), digest_size=dim).digest()
    return [float(byte + 1) for byte in digest]


def unit(v: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def assert_vectors(got: list[list[float]], expected: list[list[float]]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g == pytest.approx(e)


def ok_response(inputs: list[str], *, shuffle: bool = False, dim: int = 4) -> httpx.Response:
    data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dim)} for i, t in enumerate(inputs)]
    if shuffle:
        random.Random(7).shuffle(data)
    return httpx.Response(200, json={"object": "list", "data": data, "model": "m", "usage": {}})


class Server:
    """A scripted MockTransport handler: each request pops the next step (a Response, an exception, or None for
    a normal answer); requests are recorded."""

    def __init__(self, steps: list | None = None, *, shuffle: bool = False, dim: int = 4) -> None:
        self.steps = list(steps or [])
        self.requests: list[dict] = []
        self.headers: list[httpx.Headers] = []
        self.shuffle = shuffle
        self.dim = dim

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(request.headers)
        step = self.steps.pop(0) if self.steps else None
        if isinstance(step, Exception):
            raise step
        if isinstance(step, httpx.Response):
            return step
        return ok_response(body["input"], shuffle=self.shuffle, dim=self.dim)


def make_openai(server: Server, **kw) -> tuple[OpenAIEmbedder, list[float]]:
    waits: list[float] = []
    kw.setdefault("model", "text-embedding-3-small")
    kw.setdefault("api_key", "sk-test")
    emb = OpenAIEmbedder(
        httpx.Client(transport=httpx.MockTransport(server)), base_url=BASE, sleep=waits.append, **kw
    )
    return emb, waits


def test_openai_request_shape_and_normalisation():
    server = Server()
    emb, _ = make_openai(server, dimensions=4)
    vectors = emb.embed(["alpha", "beta"])
    assert server.requests == [
        {"model": "text-embedding-3-small", "input": ["alpha", "beta"], "encoding_format": "float", "dimensions": 4}
    ]
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert_vectors(vectors, [unit(fake_vector("alpha")), unit(fake_vector("beta"))])
    for v in vectors:
        assert math.sqrt(sum(x * x for x in v)) == pytest.approx(1.0)
    assert isinstance(emb, Embedder) and isinstance(emb.tokenizer, Tokenizer)


def test_openai_batches_split_at_input_count():
    server = Server()
    emb, _ = make_openai(server, dimensions=4, max_batch_inputs=3)
    texts = [f"text {i}" for i in range(8)]
    vectors = emb.embed(texts)
    assert [r["input"] for r in server.requests] == [texts[0:3], texts[3:6], texts[6:8]]
    assert_vectors(vectors, [unit(fake_vector(t)) for t in texts])


def test_openai_batches_split_at_token_budget():
    server = Server()
    tok = EstimatingTokenizer()
    texts = ["word " * 10, "word " * 10, "word " * 10, "word " * 25, "x"]
    counts = [tok.count(t) for t in texts]  # 17, 17, 17, 42, 1 (bytes / 3 dominates)
    budget = counts[0] * 2  # two of the short texts fit, a third does not
    emb, _ = make_openai(server, dimensions=4, max_batch_tokens=budget)
    vectors = emb.embed(texts)
    batches = [r["input"] for r in server.requests]
    assert batches == [texts[0:2], texts[2:3], texts[3:4], texts[4:5]]  # the over-budget text goes alone
    for batch in batches[:-2]:
        assert sum(tok.count(t) for t in batch) <= budget
    assert len(vectors) == len(texts)


def test_openai_order_restored_from_shuffled_index():
    server = Server(shuffle=True)
    emb, _ = make_openai(server, dimensions=4)
    texts = [f"input number {i}" for i in range(20)]
    assert_vectors(emb.embed(texts), [unit(fake_vector(t)) for t in texts])


def test_openai_empty_input_sent_as_space_and_empty_list():
    server = Server()
    emb, _ = make_openai(server, dimensions=4)
    assert emb.embed([]) == [] and server.requests == []
    emb.embed(["", "a"])
    assert server.requests[0]["input"] == [" ", "a"]


def test_openai_429_retry_after_seconds_honoured():
    server = Server(
        [httpx.Response(429, headers={"Retry-After": "2"}), httpx.Response(429, headers={"retry-after-ms": "1500"})]
    )
    emb, waits = make_openai(server, dimensions=4)
    assert len(emb.embed(["a"])) == 1
    assert waits == [2.0, 1.5]
    assert len(server.requests) == 3


def test_openai_429_retry_after_http_date():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    server = Server([httpx.Response(429, headers={"Retry-After": when})])
    emb, waits = make_openai(server, dimensions=4)
    emb.embed(["a"])
    assert len(waits) == 1 and 27 <= waits[0] <= 31


def test_openai_500_then_success_uses_backoff():
    server = Server([httpx.Response(500, json={"error": {"message": "boom"}})])
    emb, waits = make_openai(server, dimensions=4)
    assert len(emb.embed(["a"])) == 1
    assert len(waits) == 1 and 0.375 <= waits[0] <= 0.5  # 0.5 s × jitter in (0.75, 1]


def test_openai_persistent_503_raises_upstream_after_max_retries():
    server = Server([httpx.Response(503, text="unavailable")] * 10)
    emb, waits = make_openai(server, dimensions=4, max_retries=3)
    with pytest.raises(UpstreamError) as info:
        emb.embed(["a"])
    assert type(info.value) is UpstreamError and "503" in info.value.message
    assert len(server.requests) == 4 and len(waits) == 3
    assert 0.375 <= waits[0] <= 0.5 and 0.75 <= waits[1] <= 1.0 and 1.5 <= waits[2] <= 2.0  # exponential


def test_openai_persistent_429_raises_rate_limit():
    server = Server([httpx.Response(429, json={"error": {"message": "slow down"}})] * 10)
    emb, waits = make_openai(server, dimensions=4, max_retries=2)
    with pytest.raises(RateLimitError, match="slow down"):
        emb.embed(["a"])
    assert len(server.requests) == 3


def test_openai_timeout_raises_upstream_timeout():
    server = Server([httpx.ReadTimeout("slow")] * 10)
    emb, waits = make_openai(server, dimensions=4, max_retries=2)
    with pytest.raises(UpstreamTimeoutError) as info:
        emb.embed(["a"])
    assert isinstance(info.value.__cause__, httpx.TimeoutException)
    assert len(server.requests) == 3 and len(waits) == 2


def test_openai_connection_error_retried_then_upstream_error():
    server = Server([httpx.ConnectError("refused"), httpx.ConnectError("refused")])
    emb, waits = make_openai(server, dimensions=4, max_retries=1)
    with pytest.raises(UpstreamError) as info:
        emb.embed(["a"])
    assert type(info.value) is UpstreamError and isinstance(info.value.__cause__, httpx.ConnectError)
    # ... and a connection error followed by success recovers
    server = Server([httpx.ConnectError("refused")])
    emb, waits = make_openai(server, dimensions=4)
    assert len(emb.embed(["a"])) == 1 and len(waits) == 1


def test_openai_400_invalid_request_with_server_message():
    msg = "This model's maximum context length is 8192 tokens, however you requested 9000 tokens."
    error = {"message": msg, "type": "invalid_request_error", "code": None}
    server = Server([httpx.Response(400, json={"error": error})])
    emb, waits = make_openai(server, dimensions=4)
    with pytest.raises(InvalidRequestError) as info:
        emb.embed(["a"])
    assert msg in info.value.message and waits == [] and len(server.requests) == 1


def test_openai_401_names_the_api_key_variable():
    server = Server([httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}})])
    emb, waits = make_openai(server, dimensions=4)
    with pytest.raises(UpstreamError) as info:
        emb.embed(["a"])
    assert "ENGRAM_EMBEDDING_API_KEY" in info.value.message and "sk-test" not in info.value.message
    assert waits == []


def test_openai_dimension_from_table_override_and_probe():
    assert make_openai(Server())[0].dimension == 1536
    assert make_openai(Server(), model="text-embedding-3-large")[0].dimension == 3072
    assert make_openai(Server(), model="text-embedding-3-large", dimensions=256)[0].dimension == 256
    server = Server(dim=7)
    emb, _ = make_openai(server, model="nomic-embed-text")
    assert server.requests == []  # lazy
    assert emb.dimension == 7 and len(server.requests) == 1
    assert emb.dimension == 7 and len(server.requests) == 1  # probed once


def test_openai_wrong_dimension_from_server_is_upstream_error():
    emb, _ = make_openai(Server(dim=5), dimensions=4)
    with pytest.raises(UpstreamError, match="5-dim"):
        emb.embed(["a"])


def test_estimating_tokenizer_is_conservative_shape():
    tok = EstimatingTokenizer()
    assert tok.count("") == 0
    assert tok.count("a") == 1
    assert tok.count("Hello, world!") == 5  # ceil(13/3)=5 ≥ 4 pieces
    assert tok.count("1234567890") == 10  # one per digit
    assert tok.count("日本語のテキスト") == 8  # ceil(24/3)=8, one piece per character


# --------------------------------------------------------------------------------------------- Bedrock


def _bedrock_client():
    import boto3

    return boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y"
    )


def _invoke_body(vector: list[float]) -> dict:
    from botocore.response import StreamingBody

    raw = json.dumps({"embedding": vector, "inputTextTokenCount": 2}).encode()
    return {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}


def test_bedrock_success_with_stubber():
    from botocore.stub import Stubber

    client = _bedrock_client()
    emb = BedrockTitanEmbedder(client, dimensions=256, max_concurrency=1)
    assert (emb.model, emb.dimension, emb.max_input_tokens) == ("amazon.titan-embed-text-v2:0", 256, 8192)
    with Stubber(client) as stub:
        for i, text in enumerate(["hello", " "]):
            vec = [0.0] * 256
            vec[i] = 2.0
            stub.add_response(
                "invoke_model",
                _invoke_body(vec),
                {
                    "modelId": "amazon.titan-embed-text-v2:0",
                    "body": json.dumps({"inputText": text, "dimensions": 256, "normalize": True}),
                    "contentType": "application/json",
                    "accept": "application/json",
                },
            )
        vectors = emb.embed(["hello", ""])
        stub.assert_no_pending_responses()
    assert len(vectors) == 2 and vectors[0][0] == 1.0 and vectors[1][1] == 1.0


def test_bedrock_throttling_and_validation_translated():
    from botocore.stub import Stubber

    client = _bedrock_client()
    emb = BedrockTitanEmbedder(client, max_concurrency=1)
    with Stubber(client) as stub:
        stub.add_client_error("invoke_model", "ThrottlingException", "Too many requests", 429)
        with pytest.raises(RateLimitError, match="Too many requests") as info:
            emb.embed(["a"])
        assert info.value.__cause__ is not None
        stub.add_client_error("invoke_model", "ValidationException", "Input is too long", 400)
        with pytest.raises(InvalidRequestError, match="Input is too long"):
            emb.embed(["a"])
        stub.add_client_error("invoke_model", "AccessDeniedException", "no access", 403)
        with pytest.raises(UpstreamError, match="no access"):
            emb.embed(["a"])


def test_bedrock_concurrent_calls_keep_order():
    class FakeClient:
        def invoke_model(self, *, modelId, body, contentType, accept):
            text = json.loads(body)["inputText"]
            time.sleep(0.001 * (len(text) % 5))
            vec = [0.0] * 1024
            vec[int(text)] = 3.0
            return {"body": io.BytesIO(json.dumps({"embedding": vec}).encode())}

    emb = BedrockTitanEmbedder(FakeClient(), max_concurrency=4)
    vectors = emb.embed([str(i) for i in range(40)])
    assert [v.index(1.0) for v in vectors] == list(range(40))


def test_bedrock_rejects_bad_dimensions_and_builds_no_client_at_init():
    with pytest.raises(ConfigurationError):
        BedrockTitanEmbedder(dimensions=300)
    emb = BedrockTitanEmbedder()
    assert emb._client is None  # built on first embed


# --------------------------------------------------------------------------------------------- hashing


def test_hashing_deterministic_normalised_and_lexical():
    a, b = HashingEmbedder(), HashingEmbedder()
    texts = ["The cat sat on the mat.", "A dog barked loudly.", ""]
    va, vb = a.embed(texts), b.embed(texts)
    assert va == vb and a.model == "hashing-384" and a.dimension == 384
    for v in va:
        assert len(v) == 384 and math.sqrt(sum(x * x for x in v)) == pytest.approx(1.0)
    q = a.embed(["cat on a mat"])[0]
    dot = lambda u, v: sum(x * y for x, y in zip(u, v))
    assert dot(q, va[0]) > dot(q, va[1])
    assert a.tokenizer.count("Hello, world!") == 4


def test_hashing_stable_across_processes():
    code = "from chalicelib.embed.hashing import HashingEmbedder; print(HashingEmbedder(16).embed(['stable text'])[0])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert json.loads(out) == pytest.approx(HashingEmbedder(16).embed(["stable text"])[0])


# --------------------------------------------------------------------------------------------- factory


@pytest.mark.parametrize(
    ("provider", "cls", "model"),
    [
        ("local", "LocalEmbedder", "all-MiniLM-L6-v2"),
        ("openai", "OpenAIEmbedder", "text-embedding-3-small"),
        ("bedrock", "BedrockTitanEmbedder", "amazon.titan-embed-text-v2:0"),
        ("hashing", "HashingEmbedder", "hashing-384"),
    ],
)
def test_build_embedder_picks_provider(provider: str, cls: str, model: str):
    settings = Settings.from_env({"ENGRAM_EMBEDDING_PROVIDER": provider, "ENGRAM_EMBEDDING_API_KEY": "k"})
    emb = build_embedder(settings)
    assert type(emb).__name__ == cls and emb.model == model
    # replace() on default settings also gets the provider's default model
    assert build_embedder(dataclasses.replace(Settings(), embedding_provider=provider)).model == model


def test_build_embedder_options():
    s = Settings()
    hashing = build_embedder(dataclasses.replace(s, embedding_provider="hashing", embedding_model="hashing-64"))
    assert hashing.dimension == 64
    openai = build_embedder(
        dataclasses.replace(
            s, embedding_provider="openai", embedding_model="text-embedding-3-large", embedding_dimensions=1024,
            embedding_max_input_tokens=1000,
        )
    )
    assert (openai.dimension, openai.max_input_tokens) == (1024, 1000)
    with pytest.raises(ConfigurationError):
        build_embedder(dataclasses.replace(s, embedding_provider="local", embedding_model="no-such-model"))
    with pytest.raises(ConfigurationError):
        build_embedder(dataclasses.replace(s, embedding_provider="local", embedding_max_input_tokens=300))
    with pytest.raises(ConfigurationError):
        build_embedder(dataclasses.replace(s, embedding_provider="nope"))


def test_importing_embed_is_cheap():
    code = (
        "import sys, chalicelib.embed, chalicelib.embed.local, chalicelib.embed.onnx_bert, chalicelib.embed.hashing;"
        "heavy = ('torch', 'sentence_transformers', 'transformers', 'onnxruntime', 'onnx', 'numpy', 'tokenizers',"
        " 'boto3', 'botocore');"
        "print([m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]"


def _model_copy(tmp_path: Path, name: str, **pooling: bool) -> Path:
    """A sentence-transformers folder named ``name`` whose files link to the bundled model's, with
    ``1_Pooling/config.json`` changed by ``pooling`` (no model load)."""
    from chalicelib.embed.local import default_model_path

    source = default_model_path()
    folder = tmp_path / name
    (folder / "1_Pooling").mkdir(parents=True)
    for item in source.iterdir():
        if item.is_file():
            (folder / item.name).symlink_to(item)
    config = json.loads((source / "1_Pooling" / "config.json").read_text())
    config.update(pooling)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))
    return folder


def test_local_model_folder_by_path(tmp_path: Path):
    folder = _model_copy(tmp_path, "my-minilm")
    emb = build_embedder(dataclasses.replace(Settings(), embedding_provider="local", embedding_model=str(folder)))
    assert (emb.model, emb.dimension, emb.max_input_tokens) == ("my-minilm", 384, 254)
    with pytest.raises(UpstreamError, match="mean or CLS"):
        build_embedder(dataclasses.replace(Settings(), embedding_provider="local", embedding_model=str(
            _model_copy(tmp_path, "max-pooled", pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True))))


def test_onnx_graph_refuses_non_bert(tmp_path: Path):
    from chalicelib.embed.onnx_bert import build_graph

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    with pytest.raises(UpstreamError, match="roberta"):
        build_graph(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "bert", "num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 4,
        "max_position_embeddings": 8}))
    with pytest.raises(UpstreamError, match="model.safetensors"):
        build_graph(tmp_path)


# --------------------------------------------------------------------------------------------- local (slow)

_SAMPLES = [
    "Hello, world!",
    "Tokenization of naïve café résumés — with ümlauts & emoji 🚀.",
    "def f(x): return x ** 2  # code\n\tindented",
    "日本語のテキストと中文文本",
    "  leading and trailing spaces  ",
    "",
]


def _dot(u: list[float], v: list[float]) -> float:
    return sum(x * y for x, y in zip(u, v))


def test_bundled_weights_are_the_recorded_ones():
    from chalicelib.embed.local import BUNDLED_WEIGHTS_SHA256, default_model_path

    digest = hashlib.sha256((default_model_path() / "model.safetensors").read_bytes()).hexdigest()
    assert digest == BUNDLED_WEIGHTS_SHA256


@pytest.mark.slow
def test_local_model_real():
    from chalicelib.embed.local import LocalEmbedder

    emb = LocalEmbedder()
    assert (emb.model, emb.dimension, emb.max_input_tokens) == ("all-MiniLM-L6-v2", 384, 254)
    query, related, unrelated = emb.embed(
        [
            "How do I reset my password?",
            "To change your password, open account settings and choose 'Reset password'.",
            "The Pacific Ocean is the largest and deepest ocean on Earth.",
        ]
    )
    assert len(query) == 384
    assert math.sqrt(sum(x * x for x in query)) == pytest.approx(1.0, abs=1e-5)
    assert _dot(query, related) > _dot(query, unrelated) + 0.2

    # The chunker's count is the number of tokens the model reads, [CLS]/[SEP] aside, up to its limit.
    for text in _SAMPLES + ["word " * 300]:
        read = len(emb._encoder.encode(text).ids) - 2
        assert read == min(emb.tokenizer.count(text), emb.max_input_tokens), text
    assert emb.tokenizer.count("word " * 300) == 300

    # Tokens past 254 are dropped by the model: the tail does not change the vector; just before it, it does.
    prefix = "the " * 254
    assert emb.tokenizer.count(prefix) == 254
    a, b = emb.embed([prefix + "apple pie recipe", prefix + "quantum chromodynamics"])
    assert a == pytest.approx(b, abs=1e-6)
    short = "the " * 253
    c, d = emb.embed([short + "apple", short + "quantum"])
    assert c != pytest.approx(d, abs=1e-4)

    # Order is kept whatever the lengths (inputs are sorted by length inside), and a text's vector depends only
    # slightly on the batch it is in (activations are quantised per call, over the whole batch).
    texts = [f"{'long ' * (i * 7)}text number {i}" for i in range(40)]
    together = emb.embed(list(reversed(texts)))[::-1]
    for text, vector in zip(texts[::9], together[::9]):
        assert _dot(emb.embed([text])[0], vector) > 0.99


@pytest.mark.slow
def test_local_int8_stays_close_to_fp32():
    from chalicelib.embed.local import LocalEmbedder

    texts = [t for t in _SAMPLES if t] + ["Dietary fiber intake and the risk of colorectal cancer: a meta-analysis."]
    int8, fp32 = LocalEmbedder().embed(texts), LocalEmbedder(quantize=False, batch_size=2).embed(texts)
    # > 0.99 where ONNX Runtime's u8s8 kernels use VNNI; 0.9868 on AVX2 without it, where VPMADDUBSW saturates
    # (ONNX Runtime, "Quantize ONNX models": "the U8S8 format may suffer from saturation issues on x86-64
    # machines without VNNI") — worst for a short text quantised in one call with long ones ("Hello, world!").
    assert min(_dot(u, v) for u, v in zip(int8, fp32)) > 0.985


@pytest.mark.slow
def test_loading_the_model_leaves_logging_alone():
    code = (
        "import logging; from chalicelib.embed.local import LocalEmbedder;"
        "LocalEmbedder().embed(['x']); print(len(logging.getLogger().handlers))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert run.stdout.strip() == "0" and run.stderr == ""


@pytest.mark.slow
def test_local_model_agrees_with_the_torch_path():
    """Same weights on sentence-transformers/torch (installed only with the ``compare`` extra)."""
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import SentenceTransformer

    from chalicelib.embed.local import LocalEmbedder, default_model_path

    emb = LocalEmbedder()
    reference = SentenceTransformer(str(default_model_path()), device="cpu")
    texts = [t for t in _SAMPLES if t] + ["word " * 300, "Statins and breast cancer survival in Finland."]
    ours = emb.embed(texts)
    theirs = reference.encode(texts, normalize_embeddings=True).tolist()
    assert min(_dot(u, v) for u, v in zip(ours, theirs)) >= 0.99
    for text in texts:
        expected = len(reference.tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"])
        assert emb.tokenizer.count(text) == expected, text
