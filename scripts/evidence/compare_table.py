"""One Markdown table from several `nest eval compare` outputs against the same base.

    python3 scripts/evidence/compare_table.py OUT_DIR/other1/compare.json OUT_DIR/other2/compare.json

Rows: task x dim (layer per row when several); columns: the base's mean, then each other's
mean with its paired difference, 95% interval and `*` where the difference survives the
comparison's correction. Standard library only.
"""
import json
import sys


def cells(path):
    d = json.load(open(path))
    out = {}
    for t in d["tasks"]:
        for row in t["cells"]:
            for c in row:
                out[(t["task"], c["layer"], c["dim"])] = c
    return d, out


def main(paths):
    loaded = [cells(p) for p in paths]
    base = loaded[0][0]["base"]["name"]
    names = [d["other"]["name"] for d, _ in loaded]
    keys = list(loaded[0][1].keys())
    layers = {k[1] for k in keys}
    head = ["task", "dim"] + (["layer"] if len(layers) > 1 else []) + [base] + names
    print("| " + " | ".join(head) + " |")
    print("|---|---:|" + ("---:|" if len(layers) > 1 else "") + "---:|" * (1 + len(names)))
    for k in keys:
        first = loaded[0][1][k]
        sd = first.get("base_sd")
        b = f"{first['base']:.2f}" + (f" ± {sd:.2f}" if sd is not None else "")
        row = [k[0], str(k[2])] + ([str(k[1])] if len(layers) > 1 else []) + [b]
        for d, cs in loaded:
            c = cs.get(k)
            if c is None:
                row.append("-")
                continue
            t = c["test"]
            star = " *" if c.get("p_holm", 1.0) < d.get("alpha", 0.05) else ""
            row.append(f"{c['other']:.2f} ({t['delta']:+.2f} [{t['lo']:+.2f}, {t['hi']:+.2f}]){star}")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
