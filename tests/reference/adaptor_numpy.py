"""The adaptor format written from its documentation, and applied with the documented numpy
recipe (docs/COMPRESSION.md), as the fixture nest-compress's tests compare `Adaptor::apply` with.

    python tests/reference/adaptor_numpy.py   # writes tests/fixtures/compress/adaptor/ and recipe.safetensors
"""
import json
import os

import numpy as np
from safetensors.numpy import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "compress")


def apply(dir, x, d):  # the documented recipe
    meta, t = json.load(open(f"{dir}/adaptor.json")), load_file(f"{dir}/adaptor.safetensors")
    k = next(i for i, h in enumerate(meta["heads"]) if d in h["dims"])
    x = x / np.linalg.norm(x, axis=1, keepdims=True)  # when meta["normalize_input"]
    y = (x @ t[f"weight.{k}"].T + t[f"bias.{k}"])[:, :d]
    return y / np.linalg.norm(y, axis=1, keepdims=True)


def main():
    rng = np.random.default_rng(11)
    D = 16
    adir = os.path.join(OUT, "adaptor")
    os.makedirs(adir, exist_ok=True)
    tensors = {
        "weight.0": rng.standard_normal((12, D)).astype(np.float32),
        "bias.0": rng.standard_normal(12).astype(np.float32) * 0.1,
        "weight.1": rng.standard_normal((4, D)).astype(np.float32),
        "bias.1": rng.standard_normal(4).astype(np.float32) * 0.1,
    }
    save_file(tensors, os.path.join(adir, "adaptor.safetensors"))
    meta = {"format": 1, "method": "fixture", "input_dim": D, "normalize_input": True,
            "heads": [{"dims": [12, 6, 3]}, {"dims": [4]}], "info": {}}
    json.dump(meta, open(os.path.join(adir, "adaptor.json"), "w"), indent=1)
    x = rng.standard_normal((5, D)).astype(np.float32) * 3
    out = {"x": x}
    for d in (12, 6, 3, 4):
        out[f"y{d}"] = apply(adir, x, d).astype(np.float32)
    save_file(out, os.path.join(OUT, "recipe.safetensors"))
    print({k: v.shape for k, v in out.items()})


if __name__ == "__main__":
    main()
