#!/usr/bin/env python3
"""Paper-like backbones: stand-ins for the MLM-only TinyBERT / BERT the papers start from.

No MLM-only checkpoint can be downloaded here, so issue 35 builds the closest honest stand-ins
from the shipped all-MiniLM-L6-v2, deterministically (standard library only):

  models/minilm-cls          all-MiniLM-L6-v2 read through [CLS] pooling (the papers' pooling).
                             Its [CLS] vector was never trained as a sentence vector (the model
                             was trained with mean pooling), so SimCSE's loss starts large, as
                             the papers' does; the lower layers are still sentence-trained.
  models/minilm-cls-reinit2  the same with its top two layers (5 and 6 of 6) re-initialised as
                             BERT initialises them (weights N(0, initializer_range), biases 0,
                             LayerNorm 1 / 0; Python's random.gauss, seed 35): the last layers'
                             states carry no sentence training at all.

    python3 scripts/data/paperlike_models.py [--models models]

What they are not: a model pre-trained with MLM only. Layers 1-4 keep all-MiniLM-L6-v2's
sentence training (its layer-4 mean-pooled vector is a good sentence vector), so results on
them say "from a [CLS] vector that was never a sentence vector", not "from MLM pre-training".
"""
import argparse
import json
import math
import os
import random
import shutil
import struct
from array import array

SOURCE = "all-MiniLM-L6-v2"
REINIT_SEED = 35


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    return header, raw[8 + n :]


def write_safetensors(path, header, data):
    meta = {k: v for k, v in header.items()}
    blob = json.dumps(meta, separators=(",", ":")).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        f.write(data)
    os.replace(tmp, path)


def copy_model(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)


def set_cls_pooling(model_dir):
    p = os.path.join(model_dir, "1_Pooling", "config.json")
    with open(p) as f:
        cfg = json.load(f)
    for k in list(cfg):
        if k.startswith("pooling_mode_"):
            cfg[k] = False
    cfg["pooling_mode_cls_token"] = True
    with open(p, "w") as f:
        json.dump(cfg, f, indent=2)


def reinit_top_layers(model_dir, layers, std, seed):
    path = os.path.join(model_dir, "model.safetensors")
    header, data = read_safetensors(path)
    data = bytearray(data)
    rng = random.Random(seed)
    prefixes = tuple(f"encoder.layer.{i}." for i in layers)
    changed = 0
    for name in sorted(k for k in header if k != "__metadata__"):
        t = header[name]
        bare = name.split("bert.", 1)[-1]
        if not bare.startswith(prefixes):
            continue
        assert t["dtype"] == "F32", f"{name}: {t['dtype']}"
        lo, hi = t["data_offsets"]
        count = (hi - lo) // 4
        if "LayerNorm" in name and name.endswith(".weight"):
            values = array("f", [1.0] * count)
        elif name.endswith(".bias"):
            values = array("f", [0.0] * count)
        else:
            values = array("f", (rng.gauss(0.0, std) for _ in range(count)))
        data[lo:hi] = values.tobytes()
        changed += 1
    write_safetensors(path, header, bytes(data))
    return changed


def note(model_dir, text):
    with open(os.path.join(model_dir, "PAPERLIKE.md"), "w") as f:
        f.write(text + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="models")
    a = ap.parse_args()
    src = os.path.join(a.models, SOURCE)
    if not os.path.exists(os.path.join(src, "model.safetensors")):
        raise SystemExit(f"error: {src}/model.safetensors not found; run scripts/setup.sh models")
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    n = config["num_hidden_layers"]

    cls = os.path.join(a.models, "minilm-cls")
    copy_model(src, cls)
    set_cls_pooling(cls)
    note(cls, f"{SOURCE} read through [CLS] pooling (scripts/data/paperlike_models.py).")
    print(f"{cls}: [CLS] pooling")

    re = os.path.join(a.models, "minilm-cls-reinit2")
    copy_model(cls, re)
    top = [n - 2, n - 1]
    std = config.get("initializer_range", 0.02)
    k = reinit_top_layers(re, top, std, REINIT_SEED)
    note(re, f"{SOURCE}, [CLS] pooling, layers {top[0] + 1}-{top[1] + 1} of {n} re-initialised "
         f"(N(0, {std}), seed {REINIT_SEED}; scripts/data/paperlike_models.py).")
    print(f"{re}: [CLS] pooling, {k} tensors of layers {top[0] + 1}-{top[1] + 1} re-initialised")


if __name__ == "__main__":
    main()
