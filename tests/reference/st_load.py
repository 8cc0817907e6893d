"""Checks that a model saved by `nest train` loads in sentence-transformers and matches Nest.

    python tests/reference/st_load.py RUN/final NEST_EMBEDDINGS.npy SENTENCES.txt

Prints the minimum cosine between SentenceTransformer(path).encode(sentences) and the vectors
`nest encode` wrote, and exits 1 below 0.9999.
"""
import sys

import numpy as np
from sentence_transformers import SentenceTransformer

model_dir, npy, txt = sys.argv[1:4]
sentences = [l.rstrip("\n") for l in open(txt, encoding="utf-8")]
st = SentenceTransformer(model_dir, device="cpu")
ref = st.encode(sentences, convert_to_numpy=True, normalize_embeddings=True)
ours = np.load(npy)
cos = (ref * ours).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(ours, axis=1)
print(f"{len(sentences)} sentences, min cosine {cos.min():.8f}, mean {cos.mean():.8f}")
sys.exit(0 if cos.min() >= 0.9999 else 1)
