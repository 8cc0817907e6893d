"""Reference values for Nest's paired bootstrap, Holm correction and seed spread (run once; the
output is committed).

    /work/venv/bin/python tests/reference/significance.py   # writes tests/fixtures/significance/cases.json

For each task kind, synthetic per-item scores of two methods on the same items (float32, as
report.json stores them):
- the 95% percentile interval of `stat(b) - stat(a)` from `scipy.stats.bootstrap(paired=True,
  method="percentile")`, with the statistic recomputed on each resample by scipy / scikit-learn
  (Spearman: `scipy.stats.spearmanr`; AP: `sklearn.metrics.average_precision_score`; accuracy
  and mean: numpy);
- from a numpy bootstrap of its own (another generator): the two-sided p-value
  `2 norm.sf(|delta| / sd(d))` (Wald, bootstrap standard error), the share across zero
  `min(1, 2 (min(#{d <= 0}, #{d >= 0}) + 1) / (B + 1))`, and the sd of the resampled
  differences, which sets the Monte-Carlo tolerance of the comparison;
- a two-runs-per-side case (seeds): each side's statistic is the mean over its runs on the same
  resample.
Also Holm-adjusted p-values (a plain loop over the sorted p-values) and Student's t 97.5%
quantiles (`scipy.stats.t.ppf`).
"""
import json
import os

import numpy as np
from scipy import stats
from sklearn.metrics import average_precision_score

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B = 20000
rng = np.random.default_rng(2024)


def f32(x):
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def stat(kind, gold, s):
    if kind == "sts":
        return 100 * stats.spearmanr(s, gold).statistic
    if kind == "pair":
        return 100 * average_precision_score(gold > 0.5, s)
    if kind == "cls":
        return 100 * np.mean(s == gold)
    return 100 * np.mean(s)


def side_stat(kind, gold, runs, idx):
    g = gold[idx] if len(gold) else gold
    return np.mean([stat(kind, g, r[idx]) for r in runs])


def make(kind, n):
    if kind == "sts":
        gold = f32(rng.uniform(0, 5, n).round(1))
        a = f32(gold / 5 + rng.normal(0, 0.35, n))
        b = f32(gold / 5 + rng.normal(0, 0.32, n))
        return gold, [a], [b]
    if kind == "pair":
        gold = f32(rng.random(n) < 0.4)
        a = f32(gold * 0.3 + rng.normal(0, 0.3, n))
        b = f32(gold * 0.36 + rng.normal(0, 0.3, n))
        return gold, [a], [b]
    if kind == "cls":
        gold = f32(rng.integers(0, 5, n))
        a = f32(np.where(rng.random(n) < 0.6, gold, rng.integers(0, 5, n)))
        b = f32(np.where(rng.random(n) < 0.66, gold, rng.integers(0, 5, n)))
        return gold, [a], [b]
    if kind == "retrieval":
        a = f32(np.clip(rng.beta(2, 3, n), 0, 1))
        b = f32(np.clip(a + rng.normal(0.03, 0.1, n), 0, 1))
        return np.zeros(0), [a], [b]
    # two runs per side (seeds), STS
    gold = f32(rng.uniform(0, 5, n).round(1))
    a = [f32(gold / 5 + rng.normal(0, 0.35, n)) for _ in range(2)]
    b = [f32(gold / 5 + rng.normal(0, 0.30, n)) for _ in range(2)]
    return gold, a, b


def case(name, kind, n):
    gold, a, b = make(name, n)
    idx_all = np.arange(n)
    delta = side_stat(kind, gold, b, idx_all) - side_stat(kind, gold, a, idx_all)

    def diff(i):
        i = np.asarray(i, dtype=int)
        return side_stat(kind, gold, b, i) - side_stat(kind, gold, a, i)

    res = stats.bootstrap((idx_all,), diff, n_resamples=B, method="percentile",
                          vectorized=False, random_state=np.random.default_rng(1))
    own = np.random.default_rng(2)
    d = np.array([diff(own.integers(0, n, n)) for _ in range(B)])
    d = d[np.isfinite(d)]
    p_share = min(1.0, 2 * (min((d <= 0).sum(), (d >= 0).sum()) + 1) / (len(d) + 1))
    p = float(2 * stats.norm.sf(abs(delta) / np.std(d)))
    return {
        "name": name, "kind": kind, "gold": gold.tolist(),
        "a": [r.tolist() for r in a], "b": [r.tolist() for r in b],
        "delta": delta, "lo": res.confidence_interval.low, "hi": res.confidence_interval.high,
        "p": p, "p_share": p_share, "sd": float(np.std(d)), "resamples": B,
    }


def holm(p):
    order = sorted(range(len(p)), key=lambda i: p[i])
    m, out, run = len(p), [0.0] * len(p), 0.0
    for k, i in enumerate(order):
        run = max(run, min(1.0, (m - k) * p[i]))
        out[i] = run
    return out


cases = [case(k, k, 300) for k in ["sts", "pair", "cls", "retrieval"]]
cases.append(case("seeds", "sts", 300))
ps = rng.uniform(0, 0.2, 25).tolist()
out = {
    "cases": cases,
    "holm": {"p": ps, "adjusted": holm(ps)},
    "t975": [float(stats.t.ppf(0.975, df)) for df in range(1, 41)],
}
os.makedirs(os.path.join(ROOT, "tests/fixtures/significance"), exist_ok=True)
with open(os.path.join(ROOT, "tests/fixtures/significance/cases.json"), "w") as f:
    json.dump(out, f)
for c in cases:
    print(c["name"], "delta %.3f CI [%.3f, %.3f] p %.4g p_share %.4f sd %.3f" % (c["delta"], c["lo"], c["hi"], c["p"], c["p_share"], c["sd"]))
