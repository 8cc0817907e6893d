"""Side-by-side Markdown grids (layer x dim, main metric x 100) from `nest eval` reports, for the
docs (standard library only).

    python3 scripts/grid_tables.py TASK NAME=reports/x/report.json ...   # e.g. TASK = stsb/test
"""
import json
import sys


def grid(path, task):
    r = json.load(open(path))
    t = next(t for t in r["tasks"] if t["task"] == task)
    return {(c["layer"], c["dim"]): c["metrics"][t["main_metric"]] for c in t["cells"] if c.get("precision", "float32") == "float32"}


def main():
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
