#!/usr/bin/env python3
"""IBKD's stage-1 texts (issue 9): every unlabeled text of the shared datasets' train splits, deduplicated.

    python3 scripts/data/ibkd_data.py [--root ../shared/datasets] [--out runs/ibkd/stage1.tsv] [--sample N]

STS-B, SICK (sick-r; sick-e holds the same sentences), MRPC and WiC train pairs (both sentences),
Banking77 and TweetEval-emotion train texts, the SciFact corpus (title and text) and the SciFact
queries that appear in its train qrels. Never a test split. Writes one `text` column (tabs and
newlines inside a text become spaces) and prints the counts. `--sample N` keeps a uniform random
sample of N of the distinct texts (seed 42), for a budget that fits a small machine.
"""
import argparse
import json
import os
import random


def tsv(path, cols):
    with open(path, encoding="utf-8") as f:
        head = f.readline().rstrip("\n").split("\t")
        idx = [head.index(c) for c in cols]
        for line in f:
            cells = line.rstrip("\n").split("\t")
            for i in idx:
                yield cells[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "datasets"))
    ap.add_argument("--out", default="runs/ibkd/stage1.tsv")
    ap.add_argument("--sample", type=int, default=0)
    a = ap.parse_args()
    r = a.root
    parts = [
        ("stsb", tsv(f"{r}/stsb/train.tsv", ["sentence1", "sentence2"])),
        ("sick-r", tsv(f"{r}/sick-r/train.tsv", ["sentence1", "sentence2"])),
        ("mrpc", tsv(f"{r}/mrpc/train.tsv", ["sentence1", "sentence2"])),
        ("wic", tsv(f"{r}/wic/train.tsv", ["sentence1", "sentence2"])),
        ("banking77", tsv(f"{r}/banking77/train.tsv", ["text"])),
        ("tweeteval-emotion", tsv(f"{r}/tweeteval-emotion/train.tsv", ["text"])),
    ]
    corpus = []
    with open(f"{r}/scifact/corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            corpus.append((d.get("title", "") + " " + d.get("text", "")).strip())
    parts.append(("scifact corpus", corpus))
    train_q = set(tsv(f"{r}/scifact/qrels/train.tsv", ["query-id"])) if os.path.exists(f"{r}/scifact/qrels/train.tsv") else set()
    queries = []
    with open(f"{r}/scifact/queries.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if str(d["_id"]) in train_q:
                queries.append(d["text"])
    parts.append(("scifact train queries", queries))
    seen, out = set(), []
    for name, texts in parts:
        n = 0
        for t in texts:
            t = " ".join(t.split())
            n += 1
            if t and t not in seen:
                seen.add(t)
                out.append(t)
        print(f"{name}: {n} texts")
    print(f"{len(out)} distinct texts")
    if a.sample and a.sample < len(out):
        out = random.Random(42).sample(out, a.sample)
        print(f"sampled {len(out)} (seed 42)")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out + ".partial", "w", encoding="utf-8") as f:
        f.write("text\n")
        f.writelines(t + "\n" for t in out)
    os.replace(a.out + ".partial", a.out)
    print(f"{len(out)} texts -> {a.out}")


if __name__ == "__main__":
    main()
