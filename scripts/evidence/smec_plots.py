"""SVG plots of SMEC's diagnostics from the adaptors scripts/evidence/evidence_smec.sh wrote (standard
library only; the data are the same as in scripts/evidence/smec_tables.py's tables).

    python3 scripts/evidence/smec_plots.py minilm    # writes docs/figures/smec-*.svg
"""
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "docs", "figures")
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]


def info(m, name):
    p = os.path.join(ROOT, "adaptors", f"{m}-{name}", "adaptor.json")
    return json.load(open(p))["info"] if os.path.exists(p) else None


def line_plot(path, title, xlabel, ylabel, series, log_y=False):
    """series: [(label, [(x, y), ...])]"""
    W, H, L, R, T, B = 640, 400, 80, 170, 40, 50
    pts = [(x, y) for _, s in series for x, y in s]
    fy = (lambda v: math.log10(v)) if log_y else (lambda v: v)
    xs, ys = [p[0] for p in pts], [fy(p[1]) for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if y1 == y0:
        y1 = y0 + 1
    px = lambda x: L + (x - x0) / ((x1 - x0) or 1) * (W - L - R)
    py = lambda y: T + (1 - (fy(y) - y0) / (y1 - y0)) * (H - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
           f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">{xlabel}</text>',
           f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 16 {(T + H - B) / 2})">{ylabel}</text>']
    for k in range(5):  # axis ticks
        yv = y0 + (y1 - y0) * k / 4
        lab = f"{10 ** yv:.1e}" if log_y else f"{yv:.3g}"
        yy = T + (1 - k / 4) * (H - T - B)
        out.append(f'<text x="{L - 6}" y="{yy + 4}" text-anchor="end">{lab}</text>')
        xv = x0 + (x1 - x0) * k / 4
        out.append(f'<text x="{L + k / 4 * (W - L - R)}" y="{H - B + 16}" text-anchor="middle">{xv:.4g}</text>')
    for i, (label, s) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="' + " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s) + '"/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{c}"/>' for x, y in s]
        out.append(f'<rect x="{W - R + 12}" y="{T + 18 * i}" width="12" height="12" fill="{c}"/><text x="{W - R + 30}" y="{T + 18 * i + 11}">{label}</text>')
    out.append("</svg>")
    os.makedirs(OUT, exist_ok=True)
    open(path, "w").write("\n".join(out))
    print("wrote", os.path.relpath(path, ROOT))


def main():
    m = (sys.argv[1:] or ["minilm"])[0]
    a, b = info(m, "mrl"), info(m, "mrl+smrl")
    if a and b:
        last = max(h["phase"] for h in b["history"])
        bh = [h for h in b["history"] if h["phase"] == last]
        line_plot(os.path.join(OUT, f"smec-{m}-grad-variance.svg"), "Gradient variance of W rows [0, 2d), per epoch (Fig. 6a)",
                  "epoch", "variance (log)", [("MRL (parallel)", [(i + 1, h["grad_var"]) for i, h in enumerate(a["history"])]),
                                              ("SMRL, last stage", [(i + 1, h["grad_var"]) for i, h in enumerate(bh)])], log_y=True)
    sizes = [(s, info(m, f"smec-mem{s}")) for s in (1000, 2000, 10000, 15000)] + [(5000, info(m, "smec"))]
    sizes = sorted((s, i) for s, i in sizes if i)
    if len(sizes) > 1:
        d = str(min(int(k) for k in sizes[0][1]["test_ndcg_at_10"]))
        line_plot(os.path.join(OUT, f"smec-{m}-memory.svg"), f"S-XBM memory size: nDCG@10 at {d} dims (Table 3)", "memory size",
                  "nDCG@10 x 100", [("test", [(s, 100 * i["test_ndcg_at_10"][d]) for s, i in sizes]),
                                    ("validation", [(s, 100 * i["val_ndcg_at_10"][d]) for s, i in sizes])])
        line_plot(os.path.join(OUT, f"smec-{m}-memory-share.svg"), "S-XBM share of the training step (Table 3)", "memory size",
                  "% of step time", [("S-XBM share", [(s, 100 * sum(h["memory_seconds"] for h in i["history"]) / sum(h["seconds"] for h in i["history"])) for s, i in sizes])])
    rows = [n for n in ("truncate", "pca", "search-adaptor", "matryoshka-adaptor", "mrl", "smec") if info(m, n)]
    if rows:
        dims = sorted(int(k) for k in info(m, rows[0])["test_ndcg_at_10"])
        line_plot(os.path.join(OUT, f"smec-{m}-methods.svg"), "SciFact test nDCG@10 by dim", "dims", "nDCG@10 x 100",
                  [(n, [(d, 100 * info(m, n)["test_ndcg_at_10"][str(d)]) for d in dims]) for n in rows])


if __name__ == "__main__":
    main()
