"""Side-by-side Markdown grids (layer x dim, main metric x 100) from `nest eval` reports, for the
docs (standard library only).

    python3 scripts/evidence/grid_tables.py TASK NAME=reports/x/report.json ...   # e.g. TASK = stsb/test
    python3 scripts/evidence/grid_tables.py --diff TASK A=reports/a/report.json B=reports/b/report.json ...
        # per pair (first vs each other): mean, min, max of other - first over the common
        # cells, and how many are within 0.5
"""
import json
import sys


def grid(path, task):
    r = json.load(open(path))
    t = next(t for t in r["tasks"] if t["task"] == task)
    return {(c["layer"], c["dim"]): c["metrics"][t["main_metric"]] for c in t["cells"] if c.get("precision", "float32") == "float32"}


def diff(task, runs):
    (base, bg), others = runs[0], runs[1:]
    for name, g in others:
        d = [g[k] - bg[k] for k in sorted(bg) if k in g]
        near = sum(abs(x) <= 0.5 for x in d)
        print(f"{task}: {name} - {base}: mean {sum(d) / len(d):+.2f}, min {min(d):+.2f}, max {max(d):+.2f}, "
              f"{near} of {len(d)} cells within 0.5")


def main():
    if sys.argv[1] == "--diff":
        task = sys.argv[2]
        diff(task, [(n, grid(p, task)) for n, p in (a.split("=", 1) for a in sys.argv[3:])])
        return
    task, runs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    grids = [(n, grid(p, task)) for n, p in runs]
    layers = sorted({l for _, g in grids for l, _ in g})
    dims = sorted({d for _, g in grids for _, d in g})
    print(f"**{task}**, Spearman x 100, rows = dim, columns = layer; each cell: " + " / ".join(n for n, _ in grids) + "\n")
    print("| dim | " + " | ".join(f"layer {l}" for l in layers) + " |")
    print("|---:|" + "---|" * len(layers))
    for d in dims:
        cells = [" / ".join(f"{g[(l, d)]:.2f}" if (l, d) in g else "-" for _, g in grids) for l in layers]
        print(f"| {d} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
