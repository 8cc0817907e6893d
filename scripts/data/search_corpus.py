"""Collects every distinct text of ../shared/datasets into one corpus for the search benchmark,
and the query sets (SciFact queries; STS-B test sentences). Standard library only.

    python3 scripts/data/search_corpus.py [DATA] [OUT]    # default ../shared/datasets runs/search

Writes OUT/corpus.jsonl ({"id", "text", "source"}), OUT/queries-scifact.txt and
OUT/queries-sts.txt, and prints the counts. Texts are deduplicated exactly (after stripping).
"""
import csv
import json
import os
import sys

csv.field_size_limit(1 << 30)
data = sys.argv[1] if len(sys.argv) > 1 else "../shared/datasets"
out = sys.argv[2] if len(sys.argv) > 2 else "runs/search"
os.makedirs(out, exist_ok=True)
TEXT_COLS = {"sentence1", "sentence2", "premise", "hypothesis", "anchor", "positive", "negative", "text"}
seen = {}
per_source = {}


def add(text, source):
    t = text.strip()
    if t and t not in seen:
        seen[t] = source
        per_source[source] = per_source.get(source, 0) + 1


for ds in sorted(os.listdir(data)):
    d = os.path.join(data, ds)
    if not os.path.isdir(d):
        continue
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if name.endswith(".tsv") and not name.endswith(".sources.tsv"):
            with open(p, encoding="utf-8") as f:
                r = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
                for row in r:
                    for c in TEXT_COLS & set(row):
                        add(row[c], f"{ds}/{name}")
        elif name == "corpus.jsonl":
            with open(p, encoding="utf-8") as f:
                for line in f:
                    doc = json.loads(line)
                    title = doc.get("title") or ""
                    add((title + " " + doc["text"]) if title else doc["text"], f"{ds}/{name}")
with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
    for i, (t, s) in enumerate(seen.items()):
        f.write(json.dumps({"id": f"t{i}", "text": t, "source": s}, ensure_ascii=False) + "\n")
with open(os.path.join(data, "scifact", "queries.jsonl"), encoding="utf-8") as f, \
        open(os.path.join(out, "queries-scifact.txt"), "w", encoding="utf-8") as g:
    n_sci = 0
    for line in f:
        g.write(json.loads(line)["text"].replace("\n", " ") + "\n")
        n_sci += 1
with open(os.path.join(data, "stsb", "test.tsv"), encoding="utf-8") as f, \
        open(os.path.join(out, "queries-sts.txt"), "w", encoding="utf-8") as g:
    sts = set()
    for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
        sts.update([row["sentence1"].strip(), row["sentence2"].strip()])
    for t in sorted(sts):
        g.write(t + "\n")
print(json.dumps({"distinct_texts": len(seen), "per_source": per_source,
                  "queries_scifact": n_sci, "queries_sts": len(sts)}, indent=1))
