"""Single-query embedding latency of a model directory's ONNX graph (ONNX Runtime, 2 threads),
batch of one, as the server embeds a lone recall query.

Usage: python3 query_latency.py MODEL_DIR [MODEL_DIR ...]
  needs the onnxruntime==1.24.4, numpy and tokenizers packages (pip install).
"""
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


def run(d, q):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    s = ort.InferenceSession(d + "/files/model.onnx", so)
    tok = Tokenizer.from_file(d + "/files/tokenizer.json")
    tok.no_padding()
    tok.no_truncation()
    names = [i.name for i in s.get_inputs()]
    e = tok.encode(q)
    ids = np.array([e.ids], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if "token_type_ids" in names:
        feed["token_type_ids"] = np.zeros_like(ids)
    for _ in range(5):
        s.run(None, feed)
    ts = []
    for _ in range(60):
        t = time.perf_counter()
        s.run(None, feed)
        ts.append((time.perf_counter() - t) * 1000)
    ts.sort()
    return len(e.ids), statistics.median(ts), ts[int(0.95 * len(ts))]


QUERIES = [
    "What did Dana ask about renewal notices?",
    "When did Caroline go to the LGBTQ support group and what did she say about it afterwards?",
]

for q in QUERIES:
    for d in sys.argv[1:]:
        n, p50, p95 = run(d, q)
        print(f"{d}: {n} tokens: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
