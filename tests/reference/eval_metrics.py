"""Reference values for Nest's evaluation metrics (run once; the output is committed).

    python tests/reference/eval_metrics.py   # writes tests/fixtures/metrics/eval.json

Needs numpy, scikit-learn, sentence-transformers, pytrec-eval-terrier and mteb==2.26.24
(last run 2026-11-28 with scikit-learn 1.9.1, sentence-transformers 6.2.0).

Independent computations:
  - pair classification: MTEB 2's own `_find_best_acc_and_threshold` /
    `_find_best_f1_and_threshold` (mteb 2.26.24, which never puts a threshold between tied
    scores; MTEB 1 did) and sklearn.metrics.average_precision_score
  - retrieval: pytrec_eval (trec_eval) ndcg_cut_10, recip_rank over the top 10, recall_100,
    recall_1000, map_cut_100
  - classification: sklearn StandardScaler + LogisticRegression(C=1, max_iter=100, lbfgs),
    accuracy and f1_score(average="macro")
  - quantisation: sentence_transformers.quantization.quantize_embeddings (int8, ubinary)
"""
import json
import os

import numpy as np
import pytrec_eval
from mteb.abstasks.pair_classification import AbsTaskPairClassification
from sentence_transformers.quantization import quantize_embeddings
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, average_precision_score, f1_score
from sklearn.preprocessing import StandardScaler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "metrics")


def find_best_acc_and_threshold(scores, labels):
    """MTEB's own method (mteb 2.26.24, `AbsTaskPairClassification`; it reads nothing of `self`)."""
    return AbsTaskPairClassification._find_best_acc_and_threshold(None, scores, np.asarray(labels), True)


def find_best_f1_and_threshold(scores, labels):
    """MTEB's own method, as above: (f1, precision, recall, threshold)."""
    return AbsTaskPairClassification._find_best_f1_and_threshold(None, scores, np.asarray(labels), True)


def pair_case(rng, n, decimals):
    labels = (rng.random(n) < 0.4).astype(int)
    scores = np.round(0.3 * labels + rng.normal(0.5, 0.25, n), decimals)
    acc, acc_t = find_best_acc_and_threshold(scores.tolist(), labels.tolist())
    f1, p, r, f1_t = find_best_f1_and_threshold(scores.tolist(), labels.tolist())
    ap = average_precision_score(labels, scores)
    return dict(scores=scores.tolist(), labels=labels.tolist(), accuracy=acc, accuracy_threshold=acc_t,
                f1=f1, precision=p, recall=r, f1_threshold=f1_t, ap=ap)


def retrieval_case(rng):
    n_docs, n_q = 1500, 25
    docs = [f"d{i}" for i in range(n_docs)]
    qrels, run, run10 = {}, {}, {}
    for q in range(n_q):
        qid = f"q{q}"
        rel = rng.choice(n_docs, size=int(rng.integers(1, 6)), replace=False)
        qrels[qid] = {docs[i]: int(rng.integers(1, 3)) for i in rel}
        scores = np.round(rng.normal(0, 1, n_docs), 2)  # rounding makes ties
        scores[rel] += rng.normal(1.5, 1.0, len(rel))
        scores = np.round(scores, 2)
        run[qid] = {docs[i]: float(scores[i]) for i in range(n_docs)}
        # trec_eval order: score descending, ties by document id descending (two stable sorts)
        by_id = sorted(run[qid].items(), key=lambda kv: kv[0], reverse=True)
        top = sorted(by_id, key=lambda kv: kv[1], reverse=True)[:10]
        run10[qid] = dict(top)
    # a query judged only non-relevant: pytrec_eval skips it (no relevant docs), as Nest does
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_100", "recall_1000", "map_cut_100"})
    res = ev.evaluate(run)
    ev10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"})
    res10 = ev10.evaluate(run10)
    per_query = {
        q: dict(ndcg_at_10=res[q]["ndcg_cut_10"], mrr_at_10=res10[q]["recip_rank"],
                recall_at_100=res[q]["recall_100"], recall_at_1000=res[q]["recall_1000"],
                map_at_100=res[q]["map_cut_100"])
        for q in qrels
    }
    return dict(docs=docs, qrels=qrels, run={q: [run[q][d] for d in docs] for q in run}, per_query=per_query)


def classification_case(rng):
    k, d = 5, 24
    centers = rng.normal(0, 1.0, (k, d))
    def sample(n):
        y = rng.integers(0, k, n)
        x = centers[y] + rng.normal(0, 1.6, (n, d))
        return x.astype(np.float32), y
    xtr, ytr = sample(600)
    xte, yte = sample(300)
    sc = StandardScaler().fit(xtr)
    clf = LogisticRegression(C=1.0, max_iter=100).fit(sc.transform(xtr), ytr)
    pred = clf.predict(sc.transform(xte))
    return dict(x_train=xtr.tolist(), y_train=ytr.tolist(), x_test=xte.tolist(), y_test=yte.tolist(),
                classes=k, accuracy=accuracy_score(yte, pred), macro_f1=f1_score(yte, pred, average="macro"),
                predictions=pred.tolist())


def quantize_case(rng):
    x = rng.normal(0, 1, (12, 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q8 = quantize_embeddings(x, precision="int8")
    qb = quantize_embeddings(x, precision="ubinary")
    bits = np.unpackbits(qb, axis=1)[:, :16]
    return dict(x=x.tolist(), int8=q8.astype(int).tolist(), bits=bits.astype(int).tolist())


def main():
    rng = np.random.default_rng(20261121)
    out = dict(
        pair=[pair_case(rng, 300, 2), pair_case(rng, 1000, 3), pair_case(rng, 57, 1)],
        retrieval=retrieval_case(rng),
        classification=classification_case(rng),
        quantize=quantize_case(rng),
    )
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "eval.json"), "w") as f:
        json.dump(out, f)
    print("pair", [(c["accuracy"], c["f1"], c["ap"]) for c in out["pair"]])
    print("classification", out["classification"]["accuracy"], out["classification"]["macro_f1"])


if __name__ == "__main__":
    main()
