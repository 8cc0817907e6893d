"""HSIC's saturation diagnostic in numpy: the mean off-diagonal entry of each side's RBF Gram
matrix, at the paper's gamma 0.5, the authors' released 0.1, and the median heuristic
(gamma = 1 / (2 m), m the median squared distance between distinct rows), for the inputs `x`
[8, 16] and `s` [8, 12] of tests/fixtures/objectives/ibkd.safetensors.

    /work/venv/bin/python tests/reference/hsic_saturation.py

Writes tests/fixtures/objectives/hsic_saturation.json. Near 0: K is nearly the identity and
HSIC passes no gradient. Checked by crates/nest-train/tests/distill.rs
(hsic_saturation_diagnostic_matches_numpy), tolerance 1e-9 relative.
"""
import json
import os

import numpy as np
from safetensors.numpy import load_file

root = os.path.join(os.path.dirname(__file__), "..", "..")
f = load_file(os.path.join(root, "tests/fixtures/objectives/ibkd.safetensors"))


def sq_dists(z):
    n = z.shape[0]
    return np.array([[np.sum((z[i] - z[j]) ** 2) for j in range(n)] for i in range(n)])


def offdiag(k):
    n = k.shape[0]
    return float((k.sum() - np.trace(k)) / (n * (n - 1)))


out = {}
for side in ["x", "s"]:
    z = f[side].astype(np.float64)
    d = sq_dists(z)
    iu = np.triu_indices(z.shape[0], 1)
    m = float(np.median(d[iu]))
    for name, gamma in [("0.5", 0.5), ("0.1", 0.1), ("median", 1.0 / (2.0 * m))]:
        out[f"{side}_rbf_{name}"] = offdiag(np.exp(-gamma * d))
path = os.path.join(root, "tests/fixtures/objectives/hsic_saturation.json")
with open(path, "w") as fh:
    json.dump(out, fh, indent=1, sort_keys=True)
    fh.write("\n")
print(json.dumps(out, indent=1, sort_keys=True))
