"""`nest mine` next to sentence-transformers' `mine_hard_negatives` on the same model, data and
settings: how many of Nest's mined negatives sentence-transformers also picks, wall time and peak
RSS of each run (`/usr/bin/time -v`, whole processes: model load, encoding, search, writing).

    cargo build --release -p nest-cli
    /work/venv/bin/python scripts/bench/bench_mine.py --size 10000 --queries 1000          # ~5 min on 2 cores
    /work/venv/bin/python scripts/bench/bench_mine.py --size 100000 --queries 2000 --out runs/bench-mine-100k

Data (written to --out): the corpus is --size of the distinct texts of ../shared/datasets (every
text column of every TSV, then SciFact's corpus as "title text"; 102,868 in all), shuffled with
seed 0; the queries
are the first --queries (anchor, positive) pairs of SNLI's triplet files. Runs, in this order:

- sentence-transformers (float32, its default), `mine_hard_negatives(..., corpus=...)`;
- Nest at the full point (layer 6, dim 384, float32 scores) with --dtype float32 (the peer's
  arithmetic) and with --dtype auto (bf16 where this machine measured it faster);
- Nest at a cheap point (--cheap-layer, --cheap-dim; --dtype auto).

Overlap = the share of Nest's (anchor, positive, negative) triples that sentence-transformers'
output also holds (and, for the cheap point, that the full point's holds). `datasets` is not
installed in the venv: the stand-in of tests/reference/mine_reference.py gives mine_hard_negatives
the few Dataset features it touches.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "..", "shared", "datasets")
TEXT_COLUMNS = {"sentence1", "sentence2", "text", "anchor", "positive", "negative", "premise", "hypothesis",
                "sentence", "tweet"}


def corpus_texts(size):
    seen = {}
    for dirpath, _, files in sorted(os.walk(DATA)):
        if "upstream" in dirpath:
            continue
        for name in sorted(files):
            if not name.endswith(".tsv") or "qrels" in dirpath:
                continue
            with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                header = f.readline().rstrip("\n").split("\t")
                cols = [i for i, h in enumerate(header) if h in TEXT_COLUMNS]
                for line in f:
                    parts = line.rstrip("\n").split("\t")
                    for i in cols:
                        t = parts[i].strip() if i < len(parts) else ""
                        if t:
                            seen.setdefault(t, None)
    with open(os.path.join(DATA, "scifact", "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            t = (d.get("title", "") + " " + d["text"]).strip()
            seen.setdefault(" ".join(t.split()), None)
    texts = list(seen)
    random.Random(0).shuffle(texts)
    if len(texts) < size:
        print(f"note: only {len(texts)} distinct texts available (asked {size})", file=sys.stderr)
    return texts[:size]


def pairs(n):
    out = []
    for name in ("triplets_dev.tsv", "triplets_test.tsv"):
        with open(os.path.join(DATA, "snli", name), encoding="utf-8") as f:
            f.readline()
            for line in f:
                a, p, _ = line.rstrip("\n").split("\t")
                out.append((a.strip(), p.strip()))
    return out[:n]


def write_data(out, size, nq):
    os.makedirs(out, exist_ok=True)
    corpus = corpus_texts(size)
    with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for t in corpus:
            f.write(json.dumps({"text": t}) + "\n")
    with open(os.path.join(out, "queries.jsonl"), "w", encoding="utf-8") as f:
        for a, p in pairs(nq):
            f.write(json.dumps({"anchor": a, "positive": p}) + "\n")
    return len(corpus)


def run_st(a):
    """The peer, in its own process (timed from outside): writes JSON lines like nest mine's."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    os.environ.setdefault("TQDM_DISABLE", "1")
    from mine_reference import install_datasets_standin
    install_datasets_standin()
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives
    rows = [json.loads(line) for line in open(a.queries, encoding="utf-8")]
    corpus = [json.loads(line)["text"] for line in open(a.corpus, encoding="utf-8")]
    ds = Dataset.from_dict({"anchor": [r["anchor"] for r in rows], "positive": [r["positive"] for r in rows]})
    model = SentenceTransformer(a.model, device="cpu")
    kw = json.loads(a.options)
    out = mine_hard_negatives(ds, model, corpus=corpus, verbose=False, **kw)
    d = out.data if hasattr(out, "data") else out.to_dict()
    with open(a.output, "w", encoding="utf-8") as f:
        for i in range(len(d["anchor"])):
            f.write(json.dumps({k: d[k][i] for k in d}) + "\n")


def timed(cmd, log):
    t = time.time()
    env = dict(os.environ, TQDM_DISABLE="1")
    with open(log, "w") as lf:
        r = subprocess.run(["/usr/bin/time", "-v"] + cmd, stdout=lf, stderr=subprocess.STDOUT, env=env)
    wall = time.time() - t
    text = open(log).read()
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{text[-3000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024
    return wall, rss


def triples(path):
    out = set()
    for line in open(path, encoding="utf-8"):
        d = json.loads(line)
        negs = [d["negative"]] if "negative" in d else [d[k] for k in sorted(d) if k.startswith("negative_")]
        for n in negs:
            out.add((d["anchor"], d["positive"], n))
    return out


def overlap(ours, theirs):
    a, b = triples(ours), triples(theirs)
    return 100.0 * len(a & b) / max(len(a), 1), len(a), len(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", nargs="?", default="bench", choices=["bench", "st"])
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--queries", default="1000")
    ap.add_argument("--corpus")
    ap.add_argument("--output")
    ap.add_argument("--options", default="{}")
    ap.add_argument("--out", default=None)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--nest", default=os.path.join(ROOT, "target", "release", "nest"))
    ap.add_argument("--cheap-layer", type=int, default=3)
    ap.add_argument("--cheap-dim", type=int, default=128)
    ap.add_argument("--num-negatives", type=int, default=5)
    ap.add_argument("--relative-margin", type=float, default=0.05)
    ap.add_argument("--runs", default="full-f32,full-auto,cheap-auto",
                    help="Nest runs, in order (the first is the full point the others are compared with)")
    a = ap.parse_args()
    if a.mode == "st":
        return run_st(a)
    out = a.out or os.path.join(ROOT, "runs", f"bench-mine-{a.size}")
    n = write_data(out, a.size, int(a.queries))
    q, c = os.path.join(out, "queries.jsonl"), os.path.join(out, "corpus.jsonl")
    st_opts = {"num_negatives": a.num_negatives, "relative_margin": a.relative_margin, "batch_size": 32}
    flags = ["--num-negatives", str(a.num_negatives), "--relative-margin", str(a.relative_margin)]
    runs = []
    st_out = os.path.join(out, "st.jsonl")
    wall, rss = timed([sys.executable, os.path.abspath(__file__), "st", "--queries", q, "--corpus", c,
                       "--output", st_out, "--model", a.model, "--options", json.dumps(st_opts)],
                      os.path.join(out, "st.log"))
    runs.append({"run": "sentence-transformers (float32)", "wall_s": wall, "rss_mib": rss, "file": st_out})
    points = {"full-f32": ("nest full (6, 384), --dtype float32", [], "float32"),
              "full-auto": ("nest full (6, 384), --dtype auto", [], "auto"),
              "cheap-auto": (f"nest cheap ({a.cheap_layer}, {a.cheap_dim}), --dtype auto",
                             ["--layer", str(a.cheap_layer), "--dim", str(a.cheap_dim)], "auto")}
    for tag in a.runs.split(","):
        name, point, dtype = points[tag]
        f = os.path.join(out, f"nest-{tag}.jsonl")
        cmd = [a.nest, "mine", "--model", a.model, "--queries", q, "--corpus", c, "--output", f,
               "--overwrite", "--dtype", dtype] + point + flags
        wall, rss = timed(cmd, os.path.join(out, f"nest-{tag}.log"))
        runs.append({"run": name, "wall_s": wall, "rss_mib": rss, "file": f, "cmd": " ".join(cmd)})
    st_wall = runs[0]["wall_s"]
    full = runs[1]["file"]
    print(f"corpus {n} texts, {a.queries} query pairs; {a.num_negatives} negatives, relative margin "
          f"{a.relative_margin}; CPU: {cpu()}")
    print(f"| run | wall s | vs ST | peak RSS MiB | negatives | in ST's | in {runs[1]['run']}'s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        ov_st, mine_n, _ = overlap(r["file"], st_out)
        ov_full = overlap(r["file"], full)[0]
        print(f"| {r['run']} | {r['wall_s']:.1f} | {st_wall / r['wall_s']:.2f}x | {r['rss_mib']:.0f} | {mine_n} | "
              f"{ov_st:.2f}% | {ov_full:.2f}% |")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"size": n, "queries": a.queries, "runs": runs, "cpu": cpu()}, f, indent=1)


def cpu():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip() + f", {os.cpu_count()} CPUs"
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    main()
