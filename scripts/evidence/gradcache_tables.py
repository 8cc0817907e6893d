"""Tables for docs/DISTRIBUTED.md from scripts/evidence/gradcache_runs.sh's reports: batch 32 against
batch 256 through GradCache (chunks of 32), STS-B test and SICK-R test, Spearman x100.
MRL: layer 6 at each dim; 2DMSE: layers 1-6 x dims, the mean and the per-cell differences.
Usage: python3 scripts/evidence/gradcache_tables.py"""
import json, os, statistics

def grid(path):
    r = json.load(open(path))
    return {(t["task"], c["layer"], c["dim"]): c["metrics"][t["main_metric"]]
            for t in r["tasks"] for c in t["cells"]}

for m in ("mrl", "2dmse"):
    paths = [f"reports/gc-{m}-snli-b{b}/report.json" for b in (32, 256)]
    if not all(os.path.exists(p) for p in paths):
        print(f"{m}: reports missing"); continue
    a, b = map(grid, paths)
    tasks = sorted({k[0] for k in a})
    print(f"\n**{m}** (layer 6)\n")
    print("| dim | " + " | ".join(f"{t}: b32 | b256 | diff" for t in tasks) + " |")
    print("|---:|" + "---:|" * (3 * len(tasks)))
    for d in sorted({k[2] for k in a}):
        row = []
        for t in tasks:
            x, y = a[(t, 6, d)], b[(t, 6, d)]
            row += [f"{x:.2f}", f"{y:.2f}", f"{y - x:+.2f}"]
        print(f"| {d} | " + " | ".join(row) + " |")
    for t in tasks:
        diffs = [b[k] - a[k] for k in a if k[0] == t]
        print(f"\n{m} {t}: all {len(diffs)} cells: mean diff {statistics.mean(diffs):+.2f}, "
              f"min {min(diffs):+.2f}, max {max(diffs):+.2f}, "
              f"b256 above b32 in {sum(x > 0 for x in diffs)}")
