"""sentence-transformers' encode throughput on the same sentences as `nest bench encode`.

Prints one JSON line {"layer": sentences_per_second}. Early exit is emulated by cutting the
HF encoder's layer list, which is what a sentence-transformers user would do.
Run by `nest bench encode --python PY`; also usable alone:
    python scripts/bench_st.py --model models/all-MiniLM-L6-v2 --data ../shared/datasets/stsb/test.tsv
"""
import argparse
import csv
import json
import sys
import time

import torch
from sentence_transformers import SentenceTransformer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--layers", default="2,3,6")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    with open(a.data, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    texts = [s for r in rows for s in (r[0], r[1])]
    model = SentenceTransformer(a.model, device="cpu")
    model.eval()
    enc = model[0].auto_model.encoder
    all_layers = list(enc.layer)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {len(texts)} sentences", file=sys.stderr)
    out = {}
    for n in [int(x) for x in a.layers.split(",")]:
        enc.layer = torch.nn.ModuleList(all_layers[:n])
        model.encode(texts, batch_size=a.batch_size)  # warm-up
        best = float("inf")
        for _ in range(a.repeats):
            t = time.perf_counter()
            model.encode(texts, batch_size=a.batch_size)
            best = min(best, time.perf_counter() - t)
        out[str(n)] = len(texts) / best
        print(f"  st layer {n}: {out[str(n)]:.1f} sentences/s", file=sys.stderr)
    enc.layer = torch.nn.ModuleList(all_layers)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
