"""Reference values for Nest's metrics (run once; the output is committed).

    python tests/reference/metrics.py   # writes tests/fixtures/metrics/spearman.json

Spearman: scipy.stats.spearmanr on seeded random data, with and without ties (scores rounded to
one decimal, as STS gold scores are, and to integers for heavy ties).
"""
import json
import os

import numpy as np
from scipy.stats import spearmanr

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "metrics")


def main():
    rng = np.random.default_rng(1234)
    cases = []
    for n, rounding in [(50, None), (200, 1), (500, 0), (7, 0)]:
        x = rng.normal(size=n)
        y = 0.6 * x + rng.normal(size=n)
        if rounding is not None:
            y = np.round(y * 2, rounding)
            x = np.round(x, rounding + 1)
        rho = spearmanr(x, y).statistic
        cases.append({"x": x.tolist(), "y": y.tolist(), "spearman": float(rho)})
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "spearman.json"), "w") as f:
        json.dump({"source": "scipy.stats.spearmanr", "cases": cases}, f)
    print([c["spearman"] for c in cases])


if __name__ == "__main__":
    main()
