#!/usr/bin/env python3
"""The MIPIC / MIC training set (MIPIC Appendix A.2, MIC Appendix B.2), reproducibly, from the shared datasets.

    python3 scripts/data/structure_data.py [--root ../shared/datasets] [--seed 42] [--out runs/structure/train.tsv]

3,000 texts each from Banking77 train and TweetEval-emotion train; 1,500 pairs each from STS-B train,
SICK-R train, MRPC train and WiC train, flattened into their two sentences; deduplicated (first
occurrence kept, exact string match); shuffled with the seed. Train splits only. Writes one `text`
column (TSV, no quoting: a text holding a tab or newline is refused) and prints the counts.
"""
import argparse
import os
import random
import sys


def rows(path):
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        for n, line in enumerate(f, start=2):
            cells = line.rstrip("\n").split("\t")
            if len(cells) != len(header):
                sys.exit(f"{path}:{n}: {len(cells)} cells, expected {len(header)} ({header})")
            yield dict(zip(header, cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "datasets"))
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", default="runs/structure/train.tsv")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    texts, counts = [], []
    for name, n in [("banking77", 3000), ("tweeteval-emotion", 3000)]:
        r = [x["text"] for x in rows(os.path.join(a.root, name, "train.tsv"))]
        pick = rng.sample(r, min(n, len(r)))
        counts.append((name, len(pick), "texts"))
        texts += pick
    for name in ["stsb", "sick-r", "mrpc", "wic"]:
        r = [(x["sentence1"], x["sentence2"]) for x in rows(os.path.join(a.root, name, "train.tsv"))]
        pick = rng.sample(r, min(1500, len(r)))
        counts.append((name, len(pick), "pairs"))
        texts += [t for p in pick for t in p]
    seen, unique = set(), []
    for t in texts:
        t = t.strip()
        if t and t not in seen:
            seen.add(t)
            unique.append(t)
    rng.shuffle(unique)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tmp = f"{a.out}.partial{os.getpid()}"  # several writers at once each write their own
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("text\n")
        for t in unique:
            if "\t" in t or "\n" in t:
                sys.exit(f"a text holds a tab or newline: {t!r}")
            f.write(t + "\n")
    os.replace(tmp, a.out)
    for name, n, what in counts:
        print(f"{name}: {n} {what}")
    print(f"{len(texts)} texts flattened, {len(unique)} after deduplication -> {a.out}")


if __name__ == "__main__":
    main()
