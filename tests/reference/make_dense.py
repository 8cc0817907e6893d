"""Reference for Nest's Dense head (IBKD section 3.4 projection) against sentence-transformers.

Needs: torch, sentence-transformers, safetensors, numpy.
    python tests/reference/make_dense.py  # from the repository root, after scripts/setup.sh models

Builds SentenceTransformer(modules=[all-MiniLM-L6-v2's Transformer, Pooling, Dense(384 -> 128, no bias,
Identity; weights torch.manual_seed(0) randn * 0.05), Normalize]), saves it with sentence-transformers'
own `save` and copies what Nest cannot get from models/ into tests/fixtures/parity/dense/:
  - `modules.json`, `2_Dense/config.json`, `2_Dense/model.safetensors` (sentence-transformers' files)
  - `vectors.safetensors`: `embeddings` [n, 128] = model.encode(sentences) (normalised), and
    `embeddings_64` [n, 64] with truncate_dim=64, float32
for the sentences of tests/fixtures/parity/sentences.json.
"""
import json
import os
import shutil
import tempfile

import numpy as np
import torch
from safetensors.numpy import save_file
from sentence_transformers import SentenceTransformer, models

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "parity", "dense")

sentences = json.load(open(os.path.join(ROOT, "tests", "fixtures", "parity", "sentences.json"), encoding="utf-8"))
base = SentenceTransformer(os.path.join(ROOT, "models", "all-MiniLM-L6-v2"), device="cpu")
torch.manual_seed(0)
dense = models.Dense(384, 128, bias=False, activation_function=torch.nn.Identity())
with torch.no_grad():
    dense.linear.weight.copy_(torch.randn(128, 384) * 0.05)
model = SentenceTransformer(modules=[base[0], base[1], dense, models.Normalize()], device="cpu")
emb = model.encode(sentences, convert_to_numpy=True)
emb64 = model.encode(sentences, convert_to_numpy=True, truncate_dim=64)
emb64 = emb64 / np.linalg.norm(emb64, axis=1, keepdims=True)
with tempfile.TemporaryDirectory() as tmp:
    model.save(tmp)
    os.makedirs(os.path.join(OUT, "2_Dense"), exist_ok=True)
    shutil.copy(os.path.join(tmp, "modules.json"), os.path.join(OUT, "modules.json"))
    for f in ["config.json", "model.safetensors"]:
        shutil.copy(os.path.join(tmp, "2_Dense", f), os.path.join(OUT, "2_Dense", f))
    # the round trip through sentence-transformers' own loader gives the same vectors
    again = SentenceTransformer(tmp, device="cpu").encode(sentences, convert_to_numpy=True)
    assert np.abs(again - emb).max() < 1e-6
save_file({"embeddings": emb.astype(np.float32), "embeddings_64": emb64.astype(np.float32)},
          os.path.join(OUT, "vectors.safetensors"))
print(f"{len(sentences)} sentences -> {OUT}")
