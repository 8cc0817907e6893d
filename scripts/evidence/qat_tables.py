"""The tables of docs/TRAINING.md, "Quantization-aware training", from scripts/evidence/evidence_qat.sh's outputs.

    python3 scripts/evidence/qat_tables.py dev reports/qat-dev            # the lr grid on STS-B dev
    python3 scripts/evidence/qat_tables.py compare reports/qat/compare     # one `nest eval compare` output folder
    python3 scripts/evidence/qat_tables.py funnels reports/qat "1 2 3"     # the funnels of these seeds

0. The dev grid: each arm and lr's mean STS-B dev Spearman per precision.
1. Per task: rows = dim, columns = precision; each cell: plain MRL's mean over the seeds, then QAT minus
   MRL with its 95% paired-bootstrap interval, `*` where it survives Holm's correction (from
   `nest eval compare`'s compare.json).
2. The funnel's Recall@10 (relative to the model's exact float32:384 search) per funnel: mean ± sd over
   the seeds per arm, and the mean paired difference (from each model's `nest bench search` output).
Standard library only.
"""
import glob
import json
import os
import statistics
import sys


def compare_tables(root):
    paths = glob.glob(os.path.join(root, "**", "compare.json"), recursive=True)
    if not paths:
        return
    d = json.load(open(paths[0]))
    tasks = {}
    for t in d["tasks"]:
        tasks.setdefault((t["task"], t["main_metric"]), {})[t["precision"]] = t
    for (task, metric), by_p in tasks.items():
        precisions = [p for p in ("float32", "int8", "binary") if p in by_p]
        print(f"\n**{task}** ({metric} x 100): MRL / QAT - MRL [95% interval]\n")
        print("| dim | " + " | ".join(precisions) + " |")
        print("|---:|" + "---|" * len(precisions))
        dims = by_p[precisions[0]]["dims"]
        for i, dim in enumerate(dims):
            row = [str(dim)]
            for p in precisions:
                c = by_p[p]["cells"][i][0]
                t = c["test"]
                star = " *" if c["p_holm"] < d["alpha"] else ""
                row.append(f"{c['base']:.2f} / {t['delta']:+.2f} [{t['lo']:+.2f}, {t['hi']:+.2f}]{star}")
            print("| " + " | ".join(row) + " |")


def dev_table(root):
    """The lr grid on STS-B dev: each arm's mean Spearman over the dims, per precision and overall."""
    rows = []
    for path in sorted(glob.glob(os.path.join(root, "*", "report.json"))):
        d = json.load(open(path))
        by_p = {}
        for c in d["tasks"][0]["cells"]:
            by_p.setdefault(c["precision"], []).append(c["metrics"]["spearman"])
        means = {p: statistics.mean(v) for p, v in by_p.items()}
        rows.append((os.path.basename(os.path.dirname(path)), means))
    if not rows:
        return
    print("\n**STS-B dev** (Spearman x 100, layer 6, mean over dims 16..384), seed 1\n")
    print("| arm, lr | float32 | int8 | binary | mean |")
    print("|---|---:|---:|---:|---:|")
    for name, m in rows:
        cells = [f"{m[p]:.2f}" for p in ("float32", "int8", "binary")]
        print(f"| {name} | " + " | ".join(cells) + f" | {statistics.mean(m.values()):.2f} |")


def funnels(path):
    """{funnel: recall@10} from one `nest bench search` output (JSON lines)."""
    out = {}
    for line in open(path):
        if line.startswith("{"):
            r = json.loads(line)
            if ">" in r["funnel"]:
                out[r["funnel"]] = r["recall"]
    return out


def funnel_table(root, seeds):
    if not all(os.path.exists(os.path.join(root, f"{a}-seed{s}", "funnels.txt")) for a in ("mrl", "qat") for s in seeds):
        return
    arms = {a: [funnels(os.path.join(root, f"{a}-seed{s}", "funnels.txt")) for s in seeds] for a in ("mrl", "qat")}
    if not all(arms["mrl"]) or not all(arms["qat"]):
        return
    print("\n**Funnel Recall@10** (relative to exact float32:384 search): MRL / QAT (mean ± sd over seeds), paired difference\n")
    print("| funnel | MRL | QAT | QAT - MRL (per seed) |")
    print("|---|---:|---:|---|")
    for f in arms["mrl"][0]:
        a = [r[f] for r in arms["mrl"]]
        b = [r[f] for r in arms["qat"]]
        sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0
        diffs = ", ".join(f"{y - x:+.3f}" for x, y in zip(a, b))
        print(f"| `{f}` | {statistics.mean(a):.3f} ± {sd(a):.3f} | {statistics.mean(b):.3f} ± {sd(b):.3f} | {diffs} |")


if __name__ == "__main__":
    what, path = sys.argv[1], sys.argv[2]
    if what == "dev":
        dev_table(path)
    elif what == "compare":
        compare_tables(path)
    elif what == "funnels":
        funnel_table(path, (sys.argv[3] if len(sys.argv) > 3 else "1 2 3").split())
