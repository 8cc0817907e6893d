"""The tables of docs/DISTILL.md from the reports of scripts/evidence/evidence_ibkd.sh (standard library only).

    python3 scripts/evidence/ibkd_tables.py [reports] > docs/ibkd_tables.md

One table per task (rows = dims, columns = models, the last layer, float32); missing runs show as '-'.
The task names are matched by prefix (stsb/test, sick-r/test, scifact...).
"""
import json
import os
import sys

MODELS = [("teacher", "teacher (MPNet, 768)"), ("student", "student before"), ("sup", "fine-tuned, no teacher"),
          ("mse", "MSE (stage 1)"), ("crd", "CRD, beta = 0 (stage 1)"), ("ibkd-s1", "IBKD stage 1"),
          ("ibkd-s2", "IBKD stage 2"), ("lr1e5-s2", "IBKD stage 2, stage-1 lr 1e-5 (dev)"), ("ibkd128", "IBKD-128 (projection)"),
          ("mrl-s1", "IBKD + Matryoshka, stage 1"), ("mrl-s2", "IBKD + Matryoshka, stage 2")]
TASKS = [("stsb/test", "STS-B test (Spearman x 100)", "spearman"), ("sick-r/test", "SICK-R test (Spearman x 100)", "spearman"),
         ("scifact", "SciFact test (nDCG@10 x 100)", "ndcg_at_10")]
DIMS = [32, 64, 128, 256, 384]


def load(root, name):
    out = {}
    for suffix in ["", "-ret"]:  # the teacher's retrieval is a report of its own
        out.update(load_one(os.path.join(root, f"ibkd-{name}{suffix}", "report.json")))
    return out


def load_one(p):
    if not os.path.exists(p):
        return {}
    out = {}
    for t in json.load(open(p))["tasks"]:
        for prefix, _, metric in TASKS:
            if t["task"].startswith(prefix):
                for c in t["cells"]:
                    if c.get("precision", "float32") == "float32":
                        out[(prefix, c["dim"])] = c["metrics"][metric]
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "reports"
    reports = {n: load(root, n) for n, _ in MODELS}
    for prefix, title, _ in TASKS:
        print(f"**{title}**\n")
        print("| model | " + " | ".join(str(d) for d in DIMS) + " |")
        print("|---|" + "---:|" * len(DIMS))
        for n, label in MODELS:
            cells = [reports[n].get((prefix, d)) for d in DIMS]
            if all(v is None for v in cells) and n != "teacher":
                continue  # not evaluated
            print(f"| {label} | " + " | ".join("-" if v is None else f"{v:.2f}" for v in cells) + " |")
        t768 = reports["teacher"].get((prefix, 768))
        if t768 is not None:
            print(f"\nThe teacher at its full 768 dims: {t768:.2f}.")
        print()


if __name__ == "__main__":
    main()
