"""Convert sentence-transformers all-mpnet-base-v2 from safetensors to ONNX, without torch.

Usage: python convert.py SRC_DIR OUT.onnx
  SRC_DIR holds model.safetensors and config.json (the MPNet encoder, HF layout).

Pinned for a byte-for-byte reproducible output (fetch.sh installs exactly these):
  onnx==1.23.2  numpy==2.4.6  protobuf==7.36.2  (ml_dtypes==0.7.0, typing_extensions==4.16.0)

The graph is MPNetModel's encoder as in transformers' modeling_mpnet.py, without the pooler:
  inputs   input_ids, attention_mask      int64 [batch, seq]   (no token_type_ids: MPNet has none)
  output   last_hidden_state              float [batch, seq, hidden]
  - position ids: cumsum(input_ids != pad) * (input_ids != pad) + pad, i.e. from pad+1 on;
  - embeddings: word + position, LayerNorm;
  - relative position bias: the T5 bucket of (key pos - query pos) (bidirectional, 32 buckets,
    max_distance 128) is looked up in relative_attention_bias at conversion time for every
    distance in [-(P-1), P-1], P = max_position_embeddings - pad - 1 = 512; at run time the
    graph gathers that [2P-1, heads] table with the [seq, seq] distance matrix, so the bias
    is computed once per run and added, with the additive padding mask, in every layer;
  - 12 post-LN layers: self-attention (1/sqrt(head_dim) = 1/8 is folded into q, exactly, as a
    power of two), output dense + residual + LayerNorm, dense + exact GELU (erf), dense +
    residual + LayerNorm. Dropout is the identity.
"""
import json
import math
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}


def load_safetensors(path):
    """Reads every tensor of a .safetensors file into a dict of numpy arrays."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        arr = np.frombuffer(data[start:end], dtype=DTYPES[meta["dtype"]])
        out[name] = arr.reshape(meta["shape"])
    return out


def bucket(rel, num_buckets, max_distance=128):
    """T5 relative position bucket (bidirectional), as MPNetEncoder.relative_position_bucket."""
    n = -rel
    num_buckets //= 2
    ret = (n < 0).astype(np.int64) * num_buckets
    n = np.abs(n)
    max_exact = num_buckets // 2
    nf = np.maximum(n, 1).astype(np.float32)
    large = max_exact + (
        np.log(nf / max_exact) / np.float32(math.log(max_distance / max_exact))
        * (num_buckets - max_exact)
    ).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return ret + np.where(n < max_exact, n, large)


def convert(src, out):
    cfg = json.load(open(f"{src}/config.json"))
    w = load_safetensors(f"{src}/model.safetensors")
    hidden, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    head_dim = hidden // heads
    eps = float(cfg["layer_norm_eps"])
    pad = cfg["pad_token_id"]
    max_pos = cfg["max_position_embeddings"] - pad - 1
    assert cfg["hidden_act"] == "gelu"

    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def f32(name, arr):
        return const(name, np.asarray(arr, dtype=np.float32))

    def i64(name, arr):
        return const(name, np.asarray(arr, dtype=np.int64))

    def node(op, inputs, out_name, **attrs):
        nodes.append(helper.make_node(op, inputs, [out_name], name=out_name, **attrs))
        return out_name

    def dense(x, weight, bias, name, scale=1.0):
        # torch Linear stores [out, in]; MatMul wants [in, out].
        wt = f32(f"{name}.weight", w[weight].T * np.float32(scale))
        b = f32(f"{name}.bias", w[bias] * np.float32(scale))
        return node("Add", [node("MatMul", [x, wt], f"{name}.matmul"), b], f"{name}.out")

    def layer_norm(x, prefix, name):
        g = f32(f"{name}.gamma", w[f"{prefix}.weight"])
        b = f32(f"{name}.beta", w[f"{prefix}.bias"])
        return node("LayerNormalization", [x, g, b], name, axis=-1, epsilon=eps)

    # Shared constants.
    i64("c.ax0", [0])
    i64("c.ax1", [1])
    i64("c.ax12", [1, 2])
    i64("c.zero", 0)
    i64("c.one", 1)
    i64("c.pad", pad)
    i64("c.offset", max_pos - 1)
    f32("c.fone", 1.0)
    f32("c.fmin", np.finfo(np.float32).min)
    f32("c.half", 0.5)
    f32("c.rsqrt2", 1.0 / math.sqrt(2.0))
    i64("c.qkv_shape", [0, 0, 3, heads, head_dim])
    i64("c.ctx_shape", [0, 0, hidden])

    # Embeddings: word + position (positions count non-pad tokens from pad+1), LayerNorm.
    word = node("Gather", [f32("emb.word", w["embeddings.word_embeddings.weight"]), "input_ids"], "emb.word_out")
    not_pad = node("Cast", [node("Not", [node("Equal", ["input_ids", "c.pad"], "emb.is_pad")], "emb.not_pad_b")],
                   "emb.not_pad", to=TensorProto.INT64)
    cum = node("CumSum", [not_pad, "c.one"], "emb.cumsum")
    pos_ids = node("Add", [node("Mul", [cum, not_pad], "emb.pos_mul"), "c.pad"], "emb.pos_ids")
    pos = node("Gather", [f32("emb.pos", w["embeddings.position_embeddings.weight"]), pos_ids], "emb.pos_out")
    x = layer_norm(node("Add", [word, pos], "emb.sum"), "embeddings.LayerNorm", "emb.ln")

    # Relative position bias [1, heads, seq, seq] plus the additive mask [batch, 1, 1, seq].
    rel = np.arange(-(max_pos - 1), max_pos, dtype=np.int64)
    table = w["encoder.relative_attention_bias.weight"][bucket(rel, cfg["relative_attention_num_buckets"])]
    seq = node("Gather", [node("Shape", ["input_ids"], "rb.shape"), "c.one"], "rb.seq", axis=0)
    r = node("Range", ["c.zero", seq, "c.one"], "rb.range")
    dist = node("Sub", [node("Unsqueeze", [r, "c.ax0"], "rb.key"), node("Unsqueeze", [r, "c.ax1"], "rb.query")],
                "rb.dist")
    idx = node("Add", [dist, "c.offset"], "rb.idx")
    bias = node("Gather", [f32("rb.table", table), idx], "rb.gather", axis=0)
    bias = node("Unsqueeze", [node("Transpose", [bias], "rb.heads_first", perm=[2, 0, 1]), "c.ax0"], "rb.bias")
    mask_f = node("Cast", ["attention_mask"], "mask.float", to=TensorProto.FLOAT)
    ext = node("Mul", [node("Sub", ["c.fone", mask_f], "mask.inv"), "c.fmin"], "mask.add")
    ext = node("Unsqueeze", [ext, "c.ax12"], "mask.ext")
    attn_bias = node("Add", [bias, ext], "attn_bias")

    for i in range(cfg["num_hidden_layers"]):
        p, n = f"encoder.layer.{i}", f"l{i}"
        a = f"{p}.attention.attn"
        # Fused q/k/v projection, q pre-scaled by 1/sqrt(head_dim).
        s = 1.0 / math.sqrt(head_dim)
        qkv_w = np.concatenate([w[f"{a}.q.weight"] * np.float32(s), w[f"{a}.k.weight"], w[f"{a}.v.weight"]])
        qkv_b = np.concatenate([w[f"{a}.q.bias"] * np.float32(s), w[f"{a}.k.bias"], w[f"{a}.v.bias"]])
        qkv = node("Add", [node("MatMul", [x, f32(f"{n}.qkv.weight", qkv_w.T)], f"{n}.qkv.matmul"),
                           f32(f"{n}.qkv.bias", qkv_b)], f"{n}.qkv.out")
        qkv = node("Reshape", [qkv, "c.qkv_shape"], f"{n}.qkv.split_heads")
        qkv = node("Transpose", [qkv], f"{n}.qkv.t", perm=[2, 0, 3, 1, 4])  # [3, B, H, L, D]
        nodes.append(helper.make_node("Split", [qkv], [f"{n}.q3", f"{n}.k3", f"{n}.v3"], name=f"{n}.split", axis=0))
        q, k, v = (node("Squeeze", [f"{n}.{t}3", "c.ax0"], f"{n}.{t}") for t in "qkv")
        kt = node("Transpose", [k], f"{n}.kt", perm=[0, 1, 3, 2])
        scores = node("Add", [node("MatMul", [q, kt], f"{n}.qk"), attn_bias], f"{n}.scores")
        probs = node("Softmax", [scores], f"{n}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{n}.ctx_h")], f"{n}.ctx_t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "c.ctx_shape"], f"{n}.ctx")
        o = dense(ctx, f"{a}.o.weight", f"{a}.o.bias", f"{n}.attn_out")
        x = layer_norm(node("Add", [o, x], f"{n}.attn_res"), f"{p}.attention.LayerNorm", f"{n}.attn_ln")
        # Feed-forward with exact GELU: 0.5 * h * (1 + erf(h / sqrt(2))).
        h = dense(x, f"{p}.intermediate.dense.weight", f"{p}.intermediate.dense.bias", f"{n}.ffn_in")
        erf = node("Erf", [node("Mul", [h, "c.rsqrt2"], f"{n}.gelu.scaled")], f"{n}.gelu.erf")
        g = node("Mul", [node("Mul", [h, "c.half"], f"{n}.gelu.half"),
                         node("Add", [erf, "c.fone"], f"{n}.gelu.erf1")], f"{n}.gelu")
        f = dense(g, f"{p}.output.dense.weight", f"{p}.output.dense.bias", f"{n}.ffn_out")
        x = layer_norm(node("Add", [f, x], f"{n}.ffn_res"), f"{p}.output.LayerNorm", f"{n}.ffn_ln")

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    ids_info = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
                for name in ("input_ids", "attention_mask")]
    out_info = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])
    graph = helper.make_graph(nodes, "all-mpnet-base-v2", ids_info, [out_info], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="episodic-mpnet-convert", producer_version="1")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    with open(out, "wb") as f:
        f.write(model.SerializeToString(deterministic=True))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: convert.py SRC_DIR OUT.onnx")
    convert(sys.argv[1], sys.argv[2])
