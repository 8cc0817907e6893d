"""Reference values for hard-negative mining (run once; the output is committed).

    nice -n 19 /work/venv/bin/python tests/reference/mine_reference.py            # ~10 s
    nice -n 19 /work/venv/bin/python tests/reference/mine_reference.py --scifact  # + a real-model check (~2 min)
    # writes tests/fixtures/mine_reference.json (deterministic: same bytes every run)

An independent brute-force numpy implementation of sentence-transformers 6.2.0
`util/hard_negatives.py::mine_hard_negatives` (line numbers below are of that file), run on small
fixed vectors so that the Rust side can feed the very same vectors:

- the corpus is `dict.fromkeys(corpus + positives)` (L420): duplicate texts collapse to their first
  occurrence, and a positive missing from the corpus is appended at the end. The fixture's
  `corpus` is that de-duplicated list (the text `c29` is NOT in the corpus handed to ST; ST appends
  it). Queries are de-duplicated the same way (L428) and a repeated query's positives are pooled;
- scores are cosine similarities of the L2-normalised vectors (ST encodes with
  normalize_embeddings=True and `model.similarity`, cosine by default);
- range_max defaults to range_min + num_negatives + max_positives, or range_min + 10 *
  num_negatives + max_positives when absolute_margin, relative_margin or max_score is set (min_score
  alone does not widen it; L365-376); then num_negatives >= 1, range_min >= 0, range_min < range_max
  and num_negatives <= range_max - range_min are enforced with ValueError (L361-409);
- each query keeps its best min(range_max + max_positives, len(corpus)) rows (L547-564); its
  positives are set to -inf unless include_positives (L633-641); then, in this order, absolute_margin
  (removed if score + margin > p), relative_margin (removed if score > p - |p| * margin), with p the
  query's LOWEST positive score (L646-677), max_score (removed if score > max_score), min_score
  (removed if score < min_score) (L680-701); struck-out candidates become -inf and sort last, so
  the rank window range_min..range_max counts SURVIVORS (L704-709);
- `top` takes the window's first num_negatives (L712-714); `random` draws num_negatives distinct
  window slots among the survivors (or all slots when fewer survivors than num_negatives, so the
  -inf ones are later dropped) and re-sorts them by score (L716-726). This fixture records for
  `random` only the window (the set every draw must come from) and the count;
- output formats (L731-878): `triplet` one row per (query, positive, kept negative); `n-tuple` one
  row per (query, positive) and only if ALL num_negatives were found; `labeled-pair` per query its
  positives (label 1) then its kept negatives ONCE (label 0); `labeled-list` one row per (query,
  positive) with [positive] + kept negatives, dropped when no negative was kept.
  include_positives forces output_format n-tuple (L327-331).

The script then runs ST's real mine_hard_negatives on the same vectors (a stand-in model that
returns these vectors; a minimal stand-in for the `datasets` package, which is not installed) for
every option set and format and asserts that rows, labels and scores (1e-5) agree; for `random` it
checks, over several seeds, that every draw comes from the recorded window and has the recorded
count. It also asserts that the recorded invalid option sets raise ValueError in ST.

Tolerances for the Rust side: scores are float64 dots of the float32 vectors in the fixture; the
fixture asserts that no two candidate scores of a query are within 1e-5 of each other and that no
score is within 1e-4 of any threshold it meets, so a float32 implementation must reproduce every
index list exactly; compare scores with 1e-5.
"""
import contextlib
import io
import json
import logging
import os
import random
import re
import shutil
import sys
import tempfile
import types

os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "mine_reference.json")
F32 = np.float32
DIM, NQ, NC = 12, 8, 30


def compact_json(obj):
    """indent=1, but every list of numbers or strings on one line (small diffs, small files)."""
    text = json.dumps(obj, indent=1)
    out = re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    assert json.loads(out) == obj
    return out


# ----------------------------------------------------------------------------- the data
def unit(a):
    a = np.asarray(a, dtype=np.float64)
    return (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(F32)


def build_data():
    rng = np.random.default_rng(31415)
    corpus = unit(rng.standard_normal((NC, DIM)))
    corpus[27] = unit(corpus[0].astype(np.float64) + 0.15 * rng.standard_normal(DIM))  # near-duplicate of c0
    corpus[28] = unit(corpus[9].astype(np.float64) + 0.3 * rng.standard_normal(DIM))  # close to c9
    pos = [0, 3, 6, 9, 12, 15, 18, 29]
    queries = []
    for i, p in enumerate(pos):
        hard = (p + 1 + 2 * i) % NC  # pull each query a little towards one other row
        queries.append(corpus[p] + 0.5 * rng.standard_normal(DIM) / np.sqrt(DIM) + 0.5 * corpus[hard])
    queries = unit(np.array(queries))
    # dataset rows (query, positive): query 3 has two positives (rows 3 and 8)
    rows = [(i, p) for i, p in enumerate(pos)] + [(3, 24)]
    return queries, corpus, rows


# ----------------------------------------------------------------------------- the reference
OPTION_SETS = [
    {"name": "defaults", "opts": {}},
    {"name": "window_2_8", "opts": {"range_min": 2, "range_max": 8, "num_negatives": 3}},
    {"name": "absolute_margin", "opts": {"absolute_margin": 0.07, "num_negatives": 4}},
    {"name": "relative_margin_max_score", "opts": {"relative_margin": 0.1, "max_score": 0.6, "num_negatives": 3}},
    {"name": "min_score_only", "opts": {"min_score": 0.2, "num_negatives": 3}},
    {"name": "too_few", "opts": {"min_score": 0.25, "max_score": 0.45, "range_max": 12, "num_negatives": 5}},
    {"name": "include_positives", "opts": {"include_positives": True, "num_negatives": 4}},
    {"name": "random_window", "opts": {"sampling_strategy": "random", "range_min": 1, "range_max": 10,
                                       "relative_margin": 0.05, "num_negatives": 3}},
    {"name": "random_too_few", "opts": {"sampling_strategy": "random", "min_score": 0.3, "range_max": 12,
                                        "num_negatives": 4}},
]
INVALID_SETS = [
    {"name": "zero_negatives", "opts": {"num_negatives": 0}},
    {"name": "range_min_not_below_range_max", "opts": {"range_min": 5, "range_max": 5}},
    {"name": "window_smaller_than_num_negatives", "opts": {"range_min": 2, "range_max": 5, "num_negatives": 4}},
    {"name": "negative_range_min", "opts": {"range_min": -1, "range_max": 5}},
]
DEFAULTS = {"range_min": 0, "range_max": None, "max_score": None, "min_score": None, "absolute_margin": None,
            "relative_margin": None, "num_negatives": 3, "sampling_strategy": "top", "include_positives": False}
FORMATS = ["triplet", "n-tuple", "labeled-pair", "labeled-list"]


def window_of(o, max_positives):
    n = o["num_negatives"]
    if n < 1:
        raise ValueError("num_negatives must be at least 1")
    range_max = o["range_max"]
    if range_max is None:
        widen = o["absolute_margin"] is not None or o["relative_margin"] is not None or o["max_score"] is not None
        range_max = o["range_min"] + (10 * n if widen else n) + max_positives
    if o["range_min"] < 0:
        raise ValueError("range_min must be non-negative")
    if o["range_min"] >= range_max:
        raise ValueError("range_min must be smaller than range_max")
    if n > range_max - o["range_min"]:
        raise ValueError("too few candidates in the window")
    return range_max


def reference_mine(Q, C, rows, opts):
    o = dict(DEFAULTS, **opts)
    uq = list(dict.fromkeys(q for q, _ in rows))
    positives = {q: [] for q in uq}
    for q, p in rows:
        if p not in positives[q]:
            positives[q].append(p)
    max_positives = max(sum(1 for r in rows if r[0] == q) for q in uq)  # ST counts dataset rows per query
    range_max = window_of(o, max_positives)
    retrieve = range_max + max_positives
    S = Q.astype(np.float64) @ C.astype(np.float64).T
    per_query = []
    for q in uq:
        s = S[q]
        order = np.lexsort((np.arange(len(s)), -s))[: min(retrieve, len(s))]
        pos = positives[q]
        pscores = [float(s[p]) for p in pos]
        pmin = min(pscores)
        cand = [(int(i), float(s[i])) for i in order]
        thresholds = []
        if not o["include_positives"]:
            cand = [(i, v) for i, v in cand if i not in pos]
        if o["absolute_margin"] is not None:
            thresholds.append(pmin - o["absolute_margin"])
            cand = [(i, v) for i, v in cand if not (v + o["absolute_margin"] > pmin)]
        if o["relative_margin"] is not None:
            t = pmin - abs(pmin) * o["relative_margin"]
            thresholds.append(t)
            cand = [(i, v) for i, v in cand if not (v > t)]
        if o["max_score"] is not None:
            thresholds.append(o["max_score"])
            cand = [(i, v) for i, v in cand if not (v > o["max_score"])]
        if o["min_score"] is not None:
            thresholds.append(o["min_score"])
            cand = [(i, v) for i, v in cand if not (v < o["min_score"])]
        window = cand[o["range_min"]:range_max]
        # robustness of the fixture for a float32 implementation
        considered = [float(s[i]) for i in order]
        for t in thresholds:
            assert all(abs(v - t) > 1e-4 for v in considered), (opts, q, t)
        srt = sorted(considered)
        assert all(b - a > 1e-5 for a, b in zip(srt, srt[1:])), q
        n = o["num_negatives"]
        entry = {
            "query": q,
            "positives": pos,
            "positive_scores": pscores,
            "window": [i for i, _ in window],
            "window_scores": [v for _, v in window],
        }
        if o["sampling_strategy"] == "top":
            chosen = window[:n]
            entry["negatives"] = [i for i, _ in chosen]
            entry["negative_scores"] = [v for _, v in chosen]
        else:
            entry["count"] = min(n, len(window))
        per_query.append(entry)
    out = {"range_max": range_max, "retrieve": retrieve, "max_positives": max_positives, "per_query": per_query}
    if o["sampling_strategy"] == "top":
        out["formats"] = {f: format_rows(per_query, f, o["num_negatives"]) for f in
                          (["n-tuple"] if o["include_positives"] else FORMATS)}
    return out


def format_rows(per_query, fmt, n):
    rows = []
    for e in per_query:
        negs = list(zip(e["negatives"], e["negative_scores"]))
        if fmt == "labeled-pair":
            for p, ps in zip(e["positives"], e["positive_scores"]):
                rows.append({"query": e["query"], "doc": p, "label": 1, "score": ps})
            for i, v in negs:
                rows.append({"query": e["query"], "doc": i, "label": 0, "score": v})
            continue
        for p, ps in zip(e["positives"], e["positive_scores"]):
            if fmt == "triplet":
                for i, v in negs:
                    rows.append({"query": e["query"], "positive": p, "negative": i, "scores": [ps, v]})
            elif fmt == "n-tuple":
                if len(negs) == n:
                    rows.append({"query": e["query"], "positive": p, "negatives": [i for i, _ in negs],
                                 "scores": [ps] + [v for _, v in negs]})
            elif fmt == "labeled-list":
                if negs:
                    rows.append({"query": e["query"], "docs": [p] + [i for i, _ in negs],
                                 "labels": [1] + [0] * len(negs), "scores": [ps] + [v for _, v in negs]})
    return rows


# ----------------------------------------------------------------------------- ST, for real
def install_datasets_standin():
    """The few `datasets` features mine_hard_negatives touches (the package is not installed)."""
    import sentence_transformers.util.hard_negatives as hn  # before the stand-in: transformers probes `datasets`

    try:
        import datasets  # noqa: F401
        return
    except ImportError:
        pass

    class _Counts:
        def __init__(self, data, key):
            self.data, self.key = data, key

        def count(self):
            return self

        def to_dict(self):
            out = {}
            for col, vals in self.data.items():
                if col == self.key:
                    continue
                d = {}
                for k, v in zip(self.data[self.key], vals):
                    d[k] = d.get(k, 0) + (v is not None)
                out[col] = dict(sorted(d.items()))
            return out

    class _Frame:
        def __init__(self, data):
            self.data = data

        def groupby(self, key):
            return _Counts(self.data, key)

    class Dataset:
        def __init__(self, data):
            self.data = {k: list(v) for k, v in data.items()}

        @classmethod
        def from_dict(cls, data):
            return cls(data)

        @property
        def column_names(self):
            return list(self.data)

        def __len__(self):
            return len(next(iter(self.data.values()))) if self.data else 0

        def __getitem__(self, key):
            return self.data[key]

        def to_pandas(self):
            return _Frame(self.data)

    mod = types.ModuleType("datasets")
    mod.Dataset = Dataset
    sys.modules["datasets"] = mod
    hn.is_datasets_available = lambda: True


class VectorModel:
    """Stands in for a SentenceTransformer: text 'q3' / 'c12' -> that fixed vector."""

    device = torch.device("cpu")

    def __init__(self, Q, C):
        self.table = {f"q{i}": v for i, v in enumerate(Q)} | {f"c{i}": v for i, v in enumerate(C)}

    def _enc(self, texts, **_):
        return np.stack([self.table[t] for t in texts]).astype(F32)

    encode_query = encode_document = _enc

    def similarity(self, a, b):
        from sentence_transformers.util import cos_sim
        return cos_sim(a, b)

    def similarity_pairwise(self, a, b):
        from sentence_transformers.util import pairwise_cos_sim
        return pairwise_cos_sim(torch.as_tensor(a), torch.as_tensor(b))


def idx(t):
    return int(t[1:])


def st_rows(ds, fmt, scores):
    d = ds.data
    out = []
    for r in range(len(ds)):
        if fmt == "triplet":
            row = {"query": idx(d["query"][r]), "positive": idx(d["answer"][r]), "negative": idx(d["negative"][r])}
            if scores:
                row["scores"] = d["scores"][r]
        elif fmt == "n-tuple":
            negs = [idx(d[k][r]) for k in d if k.startswith("negative_")]
            row = {"query": idx(d["query"][r]), "positive": idx(d["answer"][r]), "negatives": negs}
            if scores:
                row["scores"] = d["scores"][r]
        elif fmt == "labeled-pair":
            row = {"query": idx(d["query"][r]), "doc": idx(d["answer"][r])}
            row["score" if scores else "label"] = d["score" if scores else "label"][r]
        else:
            row = {"query": idx(d["query"][r]), "docs": [idx(t) for t in d["answer"][r]]}
            row["scores" if scores else "labels"] = d["scores" if scores else "labels"][r]
        out.append(row)
    return out


def same_rows(mine, theirs, fmt, scores):
    assert len(mine) == len(theirs), (fmt, len(mine), len(theirs))
    for a, b in zip(mine, theirs):
        for k, v in b.items():
            if k in ("scores", "score") and scores:
                assert np.allclose(np.array(a[k]), np.array(v), atol=1e-5), (fmt, a, b)
            else:
                assert a[k] == v, (fmt, k, a, b)


def st_call(model, dataset, corpus, opts, **kw):
    from sentence_transformers.util import mine_hard_negatives
    return mine_hard_negatives(dataset, model, corpus=corpus, verbose=False, **opts, **kw)


def check_with_st(Q, C, rows, fixture):
    install_datasets_standin()
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives
    model = VectorModel(Q, C)
    dataset = Dataset.from_dict({"query": [f"q{q}" for q, _ in rows], "answer": [f"c{p}" for _, p in rows]})
    # the corpus ST is given: c0..c28 with a duplicate text (c5 again); c29 (query 7's positive) missing
    st_corpus = [f"c{i}" for i in range(29)]
    st_corpus.insert(11, "c5")
    assert list(dict.fromkeys(st_corpus + [f"c{p}" for _, p in rows])) == [f"c{i}" for i in range(NC)]
    checked = 0
    for s in OPTION_SETS:
        ref = fixture["option_sets"][s["name"]]
        if "range_max" not in s["opts"]:  # ST says which range_max it derived when verbose
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                mine_hard_negatives(dataset, model, corpus=st_corpus, verbose=True, **s["opts"])
            said = re.search(r"Setting range_max to (\d+)", buf.getvalue())
            assert said and int(said.group(1)) == ref["range_max"], (s["name"], buf.getvalue()[:200])
            checked += 1
        if "formats" in ref:
            for fmt, mine in ref["formats"].items():
                for scores in (False, True):
                    ds = st_call(model, dataset, st_corpus, s["opts"], output_format=fmt, output_scores=scores)
                    same_rows(mine, st_rows(ds, fmt, scores), fmt, scores)
                    checked += 1
        else:
            for seed in range(5):
                random.seed(seed)
                ds = st_call(model, dataset, st_corpus, s["opts"], output_format="labeled-pair", output_scores=True)
                got = {}
                for r in st_rows(ds, "labeled-pair", True):
                    got.setdefault(r["query"], []).append((r["doc"], r["score"]))
                for e in ref["per_query"]:
                    negs = got[e["query"]][len(e["positives"]):]
                    assert len(negs) == e["count"], (s["name"], e, negs)
                    assert all(i in e["window"] for i, _ in negs), (s["name"], e, negs)
                    sc = [v for _, v in negs]
                    assert sc == sorted(sc, reverse=True)
                checked += 1
    for s in INVALID_SETS:
        try:
            st_call(model, dataset, st_corpus, s["opts"])
        except ValueError:
            checked += 1
        else:
            raise AssertionError(f"ST accepted {s['name']}")
        try:
            reference_mine(Q, C, rows, s["opts"])
        except ValueError:
            pass
        else:
            raise AssertionError(f"reference accepted {s['name']}")
    return checked


# ----------------------------------------------------------------------------- optional real model
def scifact_check():
    install_datasets_standin()
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    base = "/work/shared/datasets/scifact"
    queries = {j["_id"]: j["text"] for j in map(json.loads, open(f"{base}/queries.jsonl"))}
    docs = {}
    for line in open(f"{base}/corpus.jsonl"):
        j = json.loads(line)
        docs[j["_id"]] = j["text"]
    qrels = [line.split("\t")[:2] for line in open(f"{base}/qrels/test.tsv").read().splitlines()[1:]]
    chosen = list(dict.fromkeys(q for q, _ in qrels))[:20]
    pairs = [(queries[q], docs[d]) for q, d in qrels if q in chosen]
    extra = [t for k, t in list(docs.items())[:300]]
    model = SentenceTransformer(os.path.join(ROOT, "models", "all-MiniLM-L6-v2"), device="cpu")
    dataset = Dataset.from_dict({"query": [a for a, _ in pairs], "answer": [b for _, b in pairs]})
    corpus = list(dict.fromkeys(extra + [b for _, b in pairs]))
    uq = list(dict.fromkeys(a for a, _ in pairs))
    C = model.encode_document(corpus, normalize_embeddings=True, convert_to_numpy=True, batch_size=64)
    Q = model.encode_query(uq, normalize_embeddings=True, convert_to_numpy=True)
    rows = [(uq.index(a), corpus.index(b)) for a, b in pairs]
    sets = [s for s in OPTION_SETS if "random" not in s["name"]] + [
        {"name": "nv_retriever", "opts": {"relative_margin": 0.05, "num_negatives": 5}}]
    results = []
    cache = tempfile.mkdtemp(prefix="mine-st-cache-")  # ST embeds once, then reads its own cache
    for s in sets:
        o = dict(s["opts"])
        for k in ("min_score", "max_score"):  # MiniLM scores are higher than the toy vectors'
            if k in o:
                o[k] = {"min_score": 0.3, "max_score": 0.7}[k]
        ref = reference_mine_loose(Q, C, rows, o)
        fmts = ["n-tuple"] if o.get("include_positives") else ["triplet", "labeled-pair"]
        for fmt in fmts:
            ds = mine_st_texts(model, dataset, corpus, o, fmt, cache)
            got = [(r[0], r[1], r[2]) for r in ds]
            want = [(uq[q], corpus[a], corpus[b]) for q, a, b in ref[fmt]]
            results.append((s["name"], fmt, got == want, len(got)))
    shutil.rmtree(cache, ignore_errors=True)
    return results


def reference_mine_loose(Q, C, rows, opts):
    """reference_mine's selection without the fixture's robustness asserts (real scores sit anywhere)."""
    o = dict(DEFAULTS, **opts)
    uq = list(dict.fromkeys(q for q, _ in rows))
    positives = {q: [] for q in uq}
    for q, p in rows:
        if p not in positives[q]:
            positives[q].append(p)
    max_positives = max(sum(1 for r in rows if r[0] == q) for q in uq)
    range_max = window_of(o, max_positives)
    S = Q.astype(np.float64) @ C.astype(np.float64).T
    trip, pair, ntup = [], [], []
    for q in uq:
        s = S[q]
        order = np.lexsort((np.arange(len(s)), -s))[: min(range_max + max_positives, len(s))]
        pos = positives[q]
        pmin = min(float(s[p]) for p in pos)
        cand = [(int(i), float(s[i])) for i in order]
        if not o["include_positives"]:
            cand = [(i, v) for i, v in cand if i not in pos]
        if o["absolute_margin"] is not None:
            cand = [(i, v) for i, v in cand if not (v + o["absolute_margin"] > pmin)]
        if o["relative_margin"] is not None:
            cand = [(i, v) for i, v in cand if not (v > pmin - abs(pmin) * o["relative_margin"])]
        if o["max_score"] is not None:
            cand = [(i, v) for i, v in cand if not (v > o["max_score"])]
        if o["min_score"] is not None:
            cand = [(i, v) for i, v in cand if not (v < o["min_score"])]
        negs = [i for i, _ in cand[o["range_min"]:range_max]][: o["num_negatives"]]
        for p in pos:
            trip += [(q, p, n) for n in negs]
            if len(negs) == o["num_negatives"]:
                ntup.append((q, p, negs[0]))
        pair += [(q, p, p) for p in pos] + [(q, n, n) for n in negs]
    return {"triplet": trip, "labeled-pair": pair, "n-tuple": ntup}


def mine_st_texts(model, dataset, corpus, o, fmt, cache):
    from sentence_transformers.util import mine_hard_negatives
    ds = mine_hard_negatives(dataset, model, corpus=corpus, verbose=False, output_format=fmt, batch_size=64,
                             cache_folder=cache, **o)
    d = ds.data
    if fmt == "triplet":
        return list(zip(d["query"], d["answer"], d["negative"]))
    if fmt == "labeled-pair":
        return list(zip(d["query"], d["answer"], d["answer"]))
    return list(zip(d["query"], d["answer"], d["negative_1"]))


# ----------------------------------------------------------------------------- main
def main():
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    Q, C, rows = build_data()
    fixture = {
        "about": "hard-negative mining reference (sentence-transformers 6.2.0 mine_hard_negatives semantics); "
                 "generated by tests/reference/mine_reference.py",
        "score": "cosine = dot of the (already unit-norm) float32 vectors below",
        "dim": DIM,
        "queries": [[float(v) for v in r] for r in Q],
        "corpus": [[float(v) for v in r] for r in C],
        "dataset_rows": [{"query": q, "positive": p} for q, p in rows],
        "notes": {
            "corpus_dedup": "corpus = dict.fromkeys(corpus + positives): ST was given c0..c28 with 'c5' twice and "
                            "without c29 (query 7's positive), which it appended: the list below is the result",
            "near_duplicate": "c27 is a near-duplicate of c0 (query 0's positive): a different text, so it is a "
                              "candidate negative; c4 scores above query 0's positive: a margin strikes it out",
            "negative_positive_score": "query 3's second positive c24 scores < 0; margins use the LOWEST positive "
                                       "score, so they keep only rows scoring below it (relative: p - |p| * m)",
            "multi_positive": "query 3 has positives 9 and 24 (two dataset rows); max_positives = 2 for every query",
            "random": "for sampling_strategy random only 'window' (the survivors every draw comes from) and 'count' "
                      "are recorded; ST re-sorts the draw by score, best first",
            "formats": "triplet/n-tuple/labeled-list rows are per (query, positive) in first-appearance order of the "
                       "unique queries; labeled-pair lists a query's positives then its negatives once",
        },
        "defaults": DEFAULTS,
        "dedup_example": {
            "corpus": ["a", "b", "a", "c"], "positives": ["d", "b"], "queries": ["x", "y", "x"],
            "st_corpus": list(dict.fromkeys(["a", "b", "a", "c"] + ["d", "b"])),
            "st_queries": list(dict.fromkeys(["x", "y", "x"])),
        },
        "option_sets": {},
        "invalid_option_sets": {s["name"]: dict(DEFAULTS, **s["opts"]) for s in INVALID_SETS},
    }
    for s in OPTION_SETS:
        ref = reference_mine(Q, C, rows, s["opts"])
        ref["options"] = dict(DEFAULTS, **s["opts"])
        fixture["option_sets"][s["name"]] = ref
    # the cases the fixture is meant to exercise really occur
    sets = fixture["option_sets"]
    assert 27 in sets["defaults"]["per_query"][0]["negatives"]  # the near-duplicate is a hard negative
    # c4 scores above query 0's positive: a negative by default, struck out by the margin
    assert sets["defaults"]["per_query"][0]["negatives"][0] == 4
    assert 4 not in sets["absolute_margin"]["per_query"][0]["window"]
    # query 3's lowest positive (c24) scores below zero: the margins keep only rows below it, and
    # with range_max = 10 none of its 12 retrieved rows survives (the window is cut before filtering)
    assert sets["random_window"]["per_query"][3]["window"] == []
    assert any(len(e["negatives"]) < 5 for e in sets["too_few"]["per_query"])
    assert any(len(e["negatives"]) == 5 for e in sets["too_few"]["per_query"])
    assert any(e["count"] < 4 for e in sets["random_too_few"]["per_query"])
    assert sets["absolute_margin"]["range_max"] == 42 and sets["min_score_only"]["range_max"] == 5
    assert any(p in e["negatives"] for e in sets["include_positives"]["per_query"] for p in e["positives"])
    checked = check_with_st(Q, C, rows, fixture)
    text = compact_json(fixture)
    with open(OUT, "w") as f:
        f.write(text + "\n")
    print(f"wrote {os.path.relpath(OUT, ROOT)} ({len(text)} bytes); {checked} sentence-transformers runs agree")
    if "--scifact" in sys.argv:
        for name, fmt, ok, n in scifact_check():
            print(f"scifact {name:28s} {fmt:13s} {'same' if ok else 'DIFFERENT'} ({n} rows)")


if __name__ == "__main__":
    main()
