"""A tiny EmbeddingGemma: the tiny Gemma 3 of make_gemma3.py in EmbeddingGemma's
sentence-transformers pipeline (mean pooling, `2_Dense` up, `3_Dense` down, no bias, Identity,
Normalize, and its query / document prompts), and its reference vectors for Nest's parity test
(issue 22). Run once from the repository root, after make_gemma3.py; outputs are committed.

Needs: torch, sentence-transformers, safetensors, numpy.
    python tests/reference/make_embeddinggemma.py

EmbeddingGemma-300m's own pipeline is Transformer(768) -> Pooling(mean) -> Dense(768 -> 3072,
bias=False, Identity) -> Dense(3072 -> 768, bias=False, Identity) -> Normalize, with prompts such
as "task: search result | query: " and "title: none | text: "; here the widths are 32 -> 128 -> 32.

Writes tests/fixtures/embeddinggemma-tiny/:
  - model/: the sentence-transformers folder as `SentenceTransformer.save` writes it (the
    transformer's weights copied from tests/fixtures/gemma3-tiny/model); the Dense weights drawn
    after torch.manual_seed(1) at N(0, 1/fan_in).
  - reference.safetensors: `embeddings` = encode(sentences); `embeddings_query` =
    encode(sentences, prompt_name="query"); `embeddings_16` = encode(sentences,
    truncate_dim=16) re-normalised (Matryoshka: the cut after the whole pipeline); float32.
"""
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.numpy import save_file
from sentence_transformers import SentenceTransformer, models

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEMMA = os.path.join(ROOT, "tests", "fixtures", "gemma3-tiny", "model")
OUT = os.path.join(ROOT, "tests", "fixtures", "embeddinggemma-tiny")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_parity import SENTENCES  # noqa: E402

PROMPTS = {"query": "task: search result | query: ", "document": "title: none | text: "}


def main():
    base = SentenceTransformer(GEMMA, device="cpu")
    torch.manual_seed(1)
    up = models.Dense(32, 128, bias=False, activation_function=torch.nn.Identity())
    down = models.Dense(128, 32, bias=False, activation_function=torch.nn.Identity())
    with torch.no_grad():
        for d in (up, down):
            w = d.linear.weight
            w.copy_(torch.randn_like(w) * w.shape[1] ** -0.5)
    st = SentenceTransformer(modules=[base[0], base[1], up, down, models.Normalize()],
                             device="cpu", prompts=PROMPTS)
    model = os.path.join(OUT, "model")
    shutil.rmtree(model, ignore_errors=True)
    st.save(model)
    st = SentenceTransformer(model, device="cpu")
    st.eval()
    assert len([m for m in st if isinstance(m, models.Dense)]) == 2
    emb = st.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
    query = st.encode(SENTENCES, batch_size=8, convert_to_numpy=True, prompt_name="query")
    cut = st.encode(SENTENCES, batch_size=8, convert_to_numpy=True, truncate_dim=16)
    cut = cut / np.linalg.norm(cut, axis=1, keepdims=True)
    save_file({"embeddings": emb.astype(np.float32),
               "embeddings_query": query.astype(np.float32),
               "embeddings_16": cut.astype(np.float32)},
              os.path.join(OUT, "reference.safetensors"))
    print("embeddinggemma-tiny", emb.shape, "modules", [type(m).__name__ for m in st])


if __name__ == "__main__":
    main()
