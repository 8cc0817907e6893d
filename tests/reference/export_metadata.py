"""What other tools read of Nest's export: the fixture of the CI metadata test.

    NEST=target/release/nest python tests/reference/export_metadata.py

Copies models/all-MiniLM-L6-v2, gives it a `nest.json` that records Matryoshka dims
[64, 128, 256] and exits [3, 6], and runs `nest slim --keep-layers 3 --dim 128`. Then:
- sentence-transformers loads the folder with no argument: its `truncate_dim` (read from
  `config_sentence_transformers.json`) and the shape `encode` returns;
- transformers' `AutoConfig` (what vLLM's `ModelConfig.hf_config` is) gives the two attributes
  vLLM's `is_matryoshka` / `matryoshka_dimensions` read, evaluated with vLLM's own expressions
  (`bool(getattr(hf_config, "matryoshka_dimensions", None)) or getattr(hf_config,
  "is_matryoshka", False)`; tests/reference/QUANTIZE_MINE_NOTES.md cites the source).
The fixture records those readings and the sha256 of the two config files they came from;
`crates/nest-cli/tests/export_roundtrip.rs` re-exports in CI and checks the files are the same.
"""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEST = os.environ.get("NEST", str(ROOT / "target/release/nest"))
OUT = ROOT / "tests/fixtures/export-metadata.json"
NEST_JSON = {"matryoshka_dims": [64, 128, 256], "trained_layers": [3, 6]}


def main():
    from sentence_transformers import SentenceTransformer
    from transformers import AutoConfig

    with tempfile.TemporaryDirectory() as t:
        src, out = Path(t) / "src", Path(t) / "slim"
        shutil.copytree(ROOT / "models/all-MiniLM-L6-v2", src)
        (src / "nest.json").write_text(json.dumps(NEST_JSON))
        subprocess.run([NEST, "slim", "--model", str(src), "--keep-layers", "3", "--dim", "128",
                        "--out", str(out)], check=True, env={**os.environ, "NEST_DTYPE": "float32"})
        st = SentenceTransformer(str(out), device="cpu")
        shape = list(st.encode(["a cat sat on the mat"]).shape)
        hf = AutoConfig.from_pretrained(str(out))
        is_matryoshka = bool(getattr(hf, "matryoshka_dimensions", None)) or getattr(hf, "is_matryoshka", False)
        fixture = {
            "nest_json": NEST_JSON,
            "slim": ["--keep-layers", "3", "--dim", "128"],
            "sentence_transformers": {"truncate_dim": st.truncate_dim, "encode_shape": shape},
            "vllm": {"is_matryoshka": bool(is_matryoshka),
                     "matryoshka_dimensions": getattr(hf, "matryoshka_dimensions", None),
                     "num_hidden_layers": hf.num_hidden_layers},
            "sha256": {f: hashlib.sha256((out / f).read_bytes()).hexdigest()
                       for f in ["config.json", "config_sentence_transformers.json"]},
        }
    OUT.write_text(json.dumps(fixture, indent=1) + "\n")
    print(json.dumps(fixture))


if __name__ == "__main__":
    main()
