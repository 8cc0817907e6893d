"""Markdown tables for docs/COMPRESSION.md from the adaptors scripts/evidence/evidence_smec.sh wrote
(standard library only).

    python3 scripts/evidence/smec_tables.py [minilm mpnet]
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROWS = [("truncate", "original, truncated"), ("pca", "PCA"), ("search-adaptor", "Search-Adaptor"),
        ("matryoshka-adaptor", "Matryoshka-Adaptor"), ("mrl", "MRL (SMEC's adaptor, parallel)"),
        ("mrl+smrl", "MRL + SMRL"), ("mrl+ads", "MRL + ADS"), ("mrl+sxbm", "MRL + S-XBM"), ("smec", "SMEC")]


def load(m, name):
    p = os.path.join(ROOT, "adaptors", f"{m}-{name}", "adaptor.json")
    return json.load(open(p))["info"] if os.path.exists(p) else None


def main():
    for m in sys.argv[1:] or ["minilm", "mpnet"]:
        infos = {n: load(m, n) for n, _ in ROWS}
        if not any(infos.values()):
            continue
        dims = next(i for i in infos.values() if i)["dims"]
        print(f"\n**{m}** (nDCG@10 x 100 on SciFact test; validation in brackets)\n")
        print("| method | " + " | ".join(str(d) for d in dims) + " | epochs | train s |")
        print("|---|" + "---:|" * (len(dims) + 2))
        for n, label in ROWS:
            i = infos[n]
            if not i:
                continue
            cells = [f"{100 * i['test_ndcg_at_10'][str(d)]:.2f} ({100 * i['val_ndcg_at_10'][str(d)]:.1f})" for d in dims]
            secs = sum(s["seconds"] for s in i["stages"])
            print(f"| {label} | " + " | ".join(cells) + f" | {len(i['history'])} | {secs:.0f} |")
        s = infos.get("smec")
        if s and s.get("ware_achievement"):
            print("\nADS vs truncation, WARE achievement rate (eq. 10, Table 2), per SMEC stage:\n")
            print("| kept dims | ADS | truncation |\n|---:|---:|---:|")
            for w in s["ware_achievement"]:
                print(f"| {w['k']} | {100 * w['ads']:.1f}% | {100 * w['truncation']:.1f}% |")
        # gradient statistics: MRL (parallel) vs SMRL, SMEC Figures 6-7
        a, b = infos.get("mrl"), infos.get("mrl+smrl")
        if a and b:
            print("\nGradient statistics of W (rows [0, d) and [d, 2d), d = the smallest dim; mean over the steps of each epoch); "
                  "SMRL is shown for its last stage, the one that trains the smallest dim:\n")
            print("| epoch | MRL mean abs grad [0,d) | MRL [d,2d) | MRL grad variance | SMRL [0,d) | SMRL [d,2d) | SMRL grad variance |")
            print("|---:|---:|---:|---:|---:|---:|---:|")
            last = max(h["phase"] for h in b["history"])
            bh = [h for h in b["history"] if h["phase"] == last]
            for e in range(max(len(a["history"]), len(bh))):
                x = a["history"][e] if e < len(a["history"]) else None
                y = bh[e] if e < len(bh) else None
                f = lambda h, k: f"{h[k]:.2e}" if h else "-"
                print(f"| {e + 1} | {f(x, 'grad_low')} | {f(x, 'grad_high')} | {f(x, 'grad_var')} | {f(y, 'grad_low')} | {f(y, 'grad_high')} | {f(y, 'grad_var')} |")
        mem = [(int(n.split("mem")[1]), load(m, n)) for n in [f"smec-mem{k}" for k in (1000, 2000, 10000, 15000)]]
        mem = [x for x in mem if x[1]] + ([(5000, infos["smec"])] if infos.get("smec") else [])
        if len(mem) > 1:
            d0 = dims[-1]
            print(f"\nS-XBM memory size (Table 3): time per step and nDCG@10 x 100 at {dims[-2]} and {d0} dims\n")
            print(f"| memory | s / step | S-XBM share of the step | test @{dims[-2]} | test @{d0} | val @{d0} |\n|---:|---:|---:|---:|---:|---:|")
            for size, i in sorted(mem):
                steps = sum(h["steps"] for h in i["history"])
                t = sum(h["seconds"] for h in i["history"])
                ms = sum(h["memory_seconds"] for h in i["history"])
                print(f"| {size} | {t / steps:.3f} | {100 * ms / t:.0f}% | {100 * i['test_ndcg_at_10'][str(dims[-2])]:.2f} | {100 * i['test_ndcg_at_10'][str(d0)]:.2f} | {100 * i['val_ndcg_at_10'][str(d0)]:.2f} |")


if __name__ == "__main__":
    main()
