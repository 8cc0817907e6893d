"""Nest's export, read back by sentence-transformers: the fixture of the CI round-trip test.

    NEST=target/release/nest python tests/reference/export_roundtrip.py

For each tiny backbone of tests/fixtures (made by transformers, random weights), `nest slim
--keep-layers 2` writes a model folder through Nest's exporter (the writer `nest train` uses for
`final/`: weights, config, modules, pooling, Dense and prompt files). sentence-transformers
loads that folder and encodes the sentences below (the model's default prompt, if any, as
`encode` applies it). The fixture records the sha256 of every exported file and sentence-
transformers' vectors. `crates/nest-cli/tests/export_roundtrip.rs` re-exports in CI, checks the
files are the ones sentence-transformers read here (a changed exporter must rerun this script),
and that Nest encodes the exported model as sentence-transformers did (cosine >= 0.99999).
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer

ROOT = Path(__file__).resolve().parents[2]
NEST = os.environ.get("NEST", str(ROOT / "target/release/nest"))
ARCHS = ["xlmr", "modernbert", "qwen3", "gemma3", "embeddinggemma"]
SENTENCES = [
    "A man is playing a guitar.",
    "The cat sat on the mat.",
    "Numbers: 3.14159 and 42%.",
    "Hi",
    "Scientists discovered a new species of frog in the rainforest.",
]


def files_of(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def main() -> None:
    out = {"sentences": SENTENCES, "keep_layers": 2, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ARCHS:
            src = ROOT / f"tests/fixtures/{arch}-tiny/model"
            dst = Path(tmp) / arch
            subprocess.run(
                [NEST, "slim", "--model", str(src), "--keep-layers", "2", "--out", str(dst)],
                check=True,
                env={**os.environ, "NEST_DTYPE": "float32"},
            )
            st = SentenceTransformer(str(dst), device="cpu")
            v = st.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=False)
            v = v.astype(np.float64)
            out["models"][arch] = {
                "files": files_of(dst),
                "embeddings": [[round(float(x), 8) for x in row] for row in v],
            }
            print(f"{arch}: {len(out['models'][arch]['files'])} files, vectors {v.shape}", file=sys.stderr)
    path = ROOT / "tests/fixtures/export-roundtrip.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
