#!/usr/bin/env python3
"""Tables of scripts/evidence/evidence_fidelity.sh (standard library only).

    python3 scripts/evidence/fidelity_tables.py dev [reports/fidelity-dev]

dev: STS-B dev Spearman x100 at the last layer, one row per (backbone, method), one column per
dim, then each method minus MRL on the same backbone. Missing runs show as '-'.
"""
import json
import os
import sys

BACKBONES = [("shipped", "all-MiniLM-L6-v2 (mean)"), ("cls", "minilm-cls"), ("reinit2", "minilm-cls-reinit2"),
             ("mlm", "mlm-small (MLM only)"), ("mlm-dry", "mlm-dry-small (a CPU check)")]
METHODS = [("untrained", "untrained"), ("mrl", "MRL"), ("mipic", "MIPIC"),
           ("mipic-heads", "MIPIC, head_lr 1e-3"), ("mipic-piccls", "MIPIC, PIC on [CLS]"),
           ("mipic-light", "MRL + 0.06 MIPIC"), ("mic", "MIC")]


def load(path):
    p = os.path.join(path, "report.json")
    if not os.path.exists(p):
        return {}
    out = {}
    for t in json.load(open(p))["tasks"]:
        for c in t["cells"]:
            if c.get("precision", "float32") == "float32":
                out[c["dim"]] = c["metrics"][t["main_metric"]]
    return out


def dev(root):
    reports = {(b, m): load(os.path.join(root, f"{b}-{m}")) for b, _ in BACKBONES for m, _ in METHODS}
    dims = sorted({d for r in reports.values() for d in r})
    if not dims:
        sys.exit(f"no reports under {root}")
    head = "| backbone | method | " + " | ".join(str(d) for d in dims) + " |"
    rule = "|---|---|" + "---:|" * len(dims)
    print("STS-B dev, Spearman x100 (as nest eval reports it), last layer\n")
    print(head + "\n" + rule)
    for b, bl in BACKBONES:
        for m, ml in METHODS:
            r = reports[(b, m)]
            if r:
                print(f"| {bl} | {ml} | " + " | ".join(f"{r[d]:.2f}" if d in r else "-" for d in dims) + " |")
    print("\nMinus MRL on the same backbone\n")
    print(head + "\n" + rule)
    for b, bl in BACKBONES:
        base = reports[(b, "mrl")]
        for m, ml in METHODS[2:]:
            r = reports[(b, m)]
            if r and base:
                print(f"| {bl} | {ml} | " + " | ".join(
                    f"{r[d] - base[d]:+.2f}" if d in r and d in base else "-" for d in dims) + " |")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "dev"
    if what != "dev":
        sys.exit("usage: fidelity_tables.py dev [ROOT]")
    dev(sys.argv[2] if len(sys.argv) > 2 else "reports/fidelity-dev")
