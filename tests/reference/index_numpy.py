"""Reference values for nest-index (run once; the output is committed).

    python tests/reference/index_numpy.py   # writes tests/fixtures/index/reference.json

Independent numpy (float64) computation of what an index stores and returns:
- binary levels: numpy.packbits of (prefix > 0), most significant bit first;
- int8 levels: per-row symmetric codes round(x / s), s = max|x| / 127, of the re-normalised prefix;
- exact top-10 by cosine of the re-normalised prefixes (float32:24, float32:8), and the top-10 of a
  binary:24 and an int8:24 one-stage search, ties broken by the lower row (numpy.lexsort).
Nest computes in float32; the test's tolerances are stated where it reads this file.
"""
import json
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "index", "reference.json")

rng = np.random.default_rng(7)
N, D, Q, K = 300, 24, 4, 10
x = rng.standard_normal((N, D)).astype(np.float32)
q = rng.standard_normal((Q, D)).astype(np.float32)


def prefix(a, d):
    p = a[:, :d].astype(np.float64)
    return p / np.linalg.norm(p, axis=1, keepdims=True)


def int8(a):
    s = np.abs(a).max(axis=1) / 127.0
    return np.clip(np.round(a / s[:, None]), -127, 127).astype(np.int64), s


def top(scores):
    # best first, ties by lower row
    return [np.lexsort((np.arange(len(r)), -r))[:K].tolist() for r in scores]


out = {"vectors": x.tolist(), "queries": q.tolist(), "k": K}
for d in (24, 12):
    out[f"binary_{d}_first5"] = np.packbits(x[:5, :d] > 0, axis=1).tolist()
codes, scales = int8(prefix(x, 24))
out["int8_24_first5"] = codes[:5].tolist()
out["int8_24_scales_first5"] = scales[:5].tolist()
for d in (24, 8):
    out[f"exact_{d}"] = top(prefix(q, d) @ prefix(x, d).T)
bits_x = (x[:, :24] > 0)
bits_q = (q[:, :24] > 0)
ham = (bits_q[:, None, :] != bits_x[None, :, :]).sum(-1)
out["binary_24_top"] = top(1.0 - 2.0 * ham / 24.0)
qc, qs = int8(prefix(q, 24))
out["int8_24_top"] = top((qc @ codes.T) * qs[:, None] * scales[None, :])
with open(OUT, "w") as f:
    json.dump(out, f)
print("wrote", OUT)
