"""The tables of docs/STRUCTURE.md from the reports of scripts/evidence/evidence_structure.sh (standard library only).

    python3 scripts/evidence/structure_tables.py [reports/structure] > docs/structure_tables.md

One table per task in the papers' layout (rows = dims, columns = methods, last layer), the ablations,
and the differences to MRL. Missing runs show as '-'.
"""
import json
import os
import sys

MAIN = [("untrained", "untrained"), ("simcse", "SimCSE (no MRL)"), ("mrl", "MRL"), ("ese", "ESE"),
        ("mipic", "MIPIC"), ("mic", "MIC"), ("mipic-mic", "MIPIC + MIC")]
ABLATIONS = [("mrl", "MRL"), ("mipic", "MIPIC"), ("mipic-attached", "MIPIC, PIC not detached"), ("mipic-no-sia", "MIPIC w/o SIA"), ("mipic-no-pic", "MIPIC w/o PIC"),
             ("mic", "MIC"), ("mic-scr-only", "SCR only"), ("mic-sir-only", "SIR only")]
# the papers' metrics (MIPIC A.4, MIC B.4): classification F1 (macro), pair best-threshold accuracy, STS Spearman
TASKS = [("banking77", "Banking77 (macro F1)", "macro_f1"), ("tweeteval-emotion", "TweetEval-emotion (macro F1)", "macro_f1"),
         ("mrpc/test", "MRPC (best-threshold accuracy)", "accuracy"), ("wic/test", "WiC (best-threshold accuracy)", "accuracy"),
         ("stsb/test", "STS-B (Spearman)", "spearman"), ("sick-r/test", "SICK-R (Spearman)", "spearman")]
METRIC = {t: m for t, _, m in TASKS}


def load(root, name):
    p = os.path.join(root, name, "report.json")
    if not os.path.exists(p):
        return {}
    r = json.load(open(p))
    out = {}
    for t in r["tasks"]:
        for c in t["cells"]:
            if t["task"] in METRIC and c.get("precision", "float32") == "float32":
                out[(t["task"], c["dim"])] = c["metrics"][METRIC[t["task"]]]
    return out


def table(reports, cols, task, dims):
    lines = ["| dim | " + " | ".join(label for _, label in cols) + " |", "|---:|" + "---:|" * len(cols)]
    for d in dims:
        vals = [reports[n].get((task, d)) for n, _ in cols]
        trained = [v for (n, _), v in zip(cols, vals) if v is not None and n != "untrained"]
        best = max(trained) if trained else None
        cells = []
        for (n, _), v in zip(cols, vals):
            if v is None:
                cells.append("-")
            elif v == best and n != "untrained":
                cells.append(f"**{v:.2f}**")
            else:
                cells.append(f"{v:.2f}")
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def dev_table(runs="runs"):
    """STS-B dev at the end of each run (the trainer's final grid in metrics.jsonl): the split used for choices."""
    print("| run | d=16 | d=32 | d=128 | d=384 |\n|---|---:|---:|---:|---:|")
    for name, label in [(n, l) for n, l in MAIN + ABLATIONS if n != "untrained"]:
        p = os.path.join(runs, f"structure-{name}", "metrics.jsonl")
        if not os.path.exists(p) or label in dev_table.seen:
            continue
        dev_table.seen.add(label)
        ev = [json.loads(l)["eval"] for l in open(p) if '"eval"' in l]
        if ev:
            c = ev[-1]["cells"]
            print(f"| {label} | " + " | ".join(f"{c[f'L6/d{d}']:.2f}" if f"L6/d{d}" in c else "-" for d in (16, 32, 128, 384)) + " |")
    print()


dev_table.seen = set()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "reports/structure"
    if root == "--dev":
        dev_table()
        return
    names = {n for n, _ in MAIN + ABLATIONS}
    reports = {n: load(root, n) for n in names}
    dims = sorted({d for r in reports.values() for (_, d) in r})
    for task, label, _ in TASKS:
        print(f"#### {label}: `{task}`, last layer\n")
        print(table(reports, MAIN, task, dims) + "\n")
    print("#### Ablations (MIPIC Table 3, MIC Table 5)\n")
    for task, label, _ in TASKS:
        print(f"{label}\n")
        print(table(reports, ABLATIONS, task, dims) + "\n")
    print("#### Difference to MRL (points)\n")
    methods = [("mipic", "MIPIC"), ("mic", "MIC"), ("mipic-mic", "MIPIC + MIC"), ("ese", "ESE")]
    head = ["task"] + [f"{m} @{d}" for _, m in methods for d in (16, 32, 384)]
    print("| " + " | ".join(head) + " |\n|---|" + "---:|" * (len(head) - 1))
    for task, label, _ in TASKS:
        cells = []
        for n, _ in methods:
            for d in (16, 32, 384):
                a, b = reports[n].get((task, d)), reports["mrl"].get((task, d))
                cells.append("-" if a is None or b is None else f"{a - b:+.2f}")
        print(f"| {label.split(' (')[0]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
