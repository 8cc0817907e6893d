#!/usr/bin/env python3
"""SNLI as a retrieval task in BEIR's layout (issue 40's "SNLI-style pairs").

For each split (dev, test): the queries are the premises that have an entailed hypothesis,
the corpus is every distinct hypothesis of the split (entailed, neutral and contradicting
ones: the contradictions and neutrals of a premise are its natural hard negatives), and a
query's relevant documents are its entailed hypotheses (qrels score 1). The dev split is the
training side (written as qrels/train.tsv, what `nest mine --beir DIR --split train` reads);
the test split is the evaluation side (qrels/test.tsv). SNLI's dev and test premises are
distinct captions, so nothing of the test side is seen in training.

    python3 scripts/data/snli_beir.py [--data ../shared/datasets/snli] [--out runs/snli-ev]
    # -> runs/snli-ev/dev/{corpus,queries}.jsonl, qrels/train.tsv
    #    runs/snli-ev/snli/{corpus,queries}.jsonl, qrels/test.tsv   (named snli: the task's name)
"""
import argparse
import csv
import json
import os


def convert(tsv, out, split):
    with open(tsv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    docs, queries, qrels = {}, {}, []
    for r in rows:
        h = r["hypothesis"]
        if h not in docs:
            docs[h] = f"h{len(docs)}"
    for r in rows:
        if r["label"] != "entailment":
            continue
        p = r["premise"]
        if p not in queries:
            queries[p] = f"p{len(queries)}"
        qrels.append((queries[p], docs[r["hypothesis"]]))
    qrels = sorted(set(qrels), key=lambda x: (int(x[0][1:]), int(x[1][1:])))
    os.makedirs(os.path.join(out, "qrels"), exist_ok=True)
    with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for text, i in docs.items():
            f.write(json.dumps({"_id": i, "title": "", "text": text}) + "\n")
    with open(os.path.join(out, "queries.jsonl"), "w", encoding="utf-8") as f:
        for text, i in queries.items():
            f.write(json.dumps({"_id": i, "text": text}) + "\n")
    with open(os.path.join(out, "qrels", f"{split}.tsv"), "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q, d in qrels:
            f.write(f"{q}\t{d}\t1\n")
    print(f"{out}: {len(queries)} queries, {len(docs)} documents, {len(qrels)} qrels ({split})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="../shared/datasets/snli")
    ap.add_argument("--out", default="runs/snli-ev")
    a = ap.parse_args()
    convert(os.path.join(a.data, "dev.tsv"), os.path.join(a.out, "dev"), "train")
    convert(os.path.join(a.data, "test.tsv"), os.path.join(a.out, "snli"), "test")


if __name__ == "__main__":
    main()
