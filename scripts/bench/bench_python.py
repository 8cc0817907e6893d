#!/usr/bin/env python3
"""Issue 38's speed and memory check of the Python package, with its peers in the same run.

Speed (one process, in this order, the same sentences, the same thread count):
  - `nest bench encode` (the CLI, a subprocess) at batch 32 and at batch 1: sentences/s;
  - `nest.Encoder.encode` in this process at batch 32 (one call over every sentence) and at
    batch 1 (one call per sentence): sentences/s, and the Python overhead per call, i.e. the
    time per call minus the CLI's time per batch of the same size;
  - `SentenceTransformer.encode` in this process at batch 32 and 1 (the ratio a user sees).
Memory (a fresh child process per row, so one library's allocations do not count for the
other): peak RSS (ru_maxrss) after `import`, after loading the model and after encoding
every sentence at batch 32, for nest and sentence-transformers.

    /work/venv/bin/python scripts/bench/bench_python.py --threads 2 --repeats 3 --dtype float32

Each speed figure is the best of --repeats after a warm-up pass (batch 32: of two interleaved
rounds of the CLI and the package). Print `lscpu`'s model name
next to the figures (the script does).
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sentences(path, limit):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    texts = [t for r in rows for t in (r["sentence1"], r["sentence2"])]
    return texts[:limit] if limit else texts


def cli_rate(args, batch, n):
    """sentences/s of `nest bench encode` at the full depth, `batch` per pass, one stream."""
    cmd = [args.nest, "--threads", str(args.threads), "bench", "encode", "--model", args.model,
           "--data", args.data, "--layers", str(args.layer), "--batch-size", str(batch),
           "--dtype", args.dtype, "--repeats", str(args.repeats), "--streams", "1"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    m = re.search(r"layer %d: ([0-9.]+) sentences/s" % args.layer, out.stderr + out.stdout)
    if not m:
        sys.exit("could not read the rate from: " + out.stderr + out.stdout)
    return float(m.group(1))


def best_rate(fn, n_texts, repeats):
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return n_texts / best


def per_call(fn, texts, repeats):
    """Mean seconds per single-sentence call over every text (best of `repeats` passes), as
    `nest bench encode --batch-size 1` reports its rate over the same texts."""
    for t in texts[:16]:
        fn([t])
    best = float("inf")
    for _ in range(repeats):
        s = time.perf_counter()
        for t in texts:
            fn([t])
        best = min(best, time.perf_counter() - s)
    return best / len(texts)


def speed(args):
    import torch

    torch.set_num_threads(args.threads)
    import nest
    from sentence_transformers import SentenceTransformer

    nest.set_num_threads(args.threads)
    texts = sentences(args.data, 0)
    ones = texts
    rows = {}
    m = nest.Encoder(args.model, dtype=args.dtype)
    # the CLI and the package interleaved, twice; the best of each (a load that comes and goes
    # hits both alike)
    cli32 = py32 = 0.0
    for _ in range(2):
        cli32 = max(cli32, cli_rate(args, 32, len(texts)))
        py32 = max(py32, best_rate(lambda: m.encode(texts, batch_size=32, layer=args.layer),
                                   len(texts), args.repeats))
    cli1 = cli_rate(args, 1, len(texts))
    py1_call = per_call(lambda b: m.encode(b, batch_size=1, layer=args.layer), ones, args.repeats)
    st = SentenceTransformer(args.model, device="cpu")
    if args.dtype == "bf16":
        st = st.to(torch.bfloat16)
    st32 = best_rate(lambda: st.encode(texts, batch_size=32), len(texts), args.repeats)
    st1_call = per_call(lambda b: st.encode(b, batch_size=1), ones, args.repeats)
    rows = {
        "sentences": len(texts),
        "cli_b32_per_s": cli32,
        "py_b32_per_s": py32,
        "py_vs_cli_b32": py32 / cli32,
        "py_overhead_per_call_b32_ms": 1000 * (32 / py32 - 32 / cli32),
        "cli_b1_ms": 1000 / cli1,
        "py_b1_ms": 1000 * py1_call,
        "py_overhead_per_call_b1_ms": 1000 * (py1_call - 1 / cli1),
        "st_b32_per_s": st32,
        "py_vs_st_b32": py32 / st32,
        "st_b1_ms": 1000 * st1_call,
    }
    return rows


CHILD = r"""
import json, os, sys, csv
def rss(field="VmRSS"):
    with open("/proc/self/status") as f:
        for l in f:
            if l.startswith(field + ":"):
                return int(l.split()[1]) / 1024
lib, model, data, threads, dtype = sys.argv[1:6]
import torch
torch.set_num_threads(int(threads))
out = {}
if lib == "nest":
    import nest
    out["import_mib"] = rss()
    m = nest.Encoder(model, dtype=dtype)
    enc = lambda t: m.encode(t, batch_size=32)
else:
    from sentence_transformers import SentenceTransformer
    out["import_mib"] = rss()
    m = SentenceTransformer(model, device="cpu")
    if dtype == "bf16":
        m = m.to(torch.bfloat16)
    enc = lambda t: m.encode(t, batch_size=32)
out["loaded_mib"] = rss()
with open(data, newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
texts = [t for r in rows for t in (r["sentence1"], r["sentence2"])]
v = enc(texts)
out["after_encode_mib"] = rss()
out["peak_mib"] = rss("VmHWM")  # this process's high-water mark (ru_maxrss survives exec)
out["output_mib"] = v.nbytes / 2**20
print(json.dumps(out))
"""


def memory(args):
    res = {}
    for lib in ("nest", "sentence-transformers"):
        out = subprocess.run([sys.executable, "-c", CHILD, lib, args.model, args.data,
                              str(args.threads), args.dtype], capture_output=True, text=True,
                             cwd=ROOT, env=dict(os.environ, HF_HUB_OFFLINE="1"))
        if out.returncode != 0:
            sys.exit(f"{lib}: {out.stderr}")
        res[lib] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/all-MiniLM-L6-v2")
    ap.add_argument("--data", default="../shared/datasets/stsb/test.tsv")
    ap.add_argument("--nest", default="target/release/nest", help="the CLI, for `nest bench encode`")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--layer", type=int, default=6)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bf16"])
    ap.add_argument("--out", help="write the figures as JSON here too")
    args = ap.parse_args()
    os.chdir(ROOT)
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model_name = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
    figures = {"cpu": model_name, "threads": args.threads, "dtype": args.dtype,
               "speed": speed(args), "memory": memory(args)}
    s = figures["speed"]
    print(f"CPU: {model_name}; {args.threads} threads; {args.dtype}; layer {args.layer}")
    print(f"batch 32: nest CLI {s['cli_b32_per_s']:.1f}/s, nest in Python {s['py_b32_per_s']:.1f}/s "
          f"({s['py_vs_cli_b32']:.3f}x the CLI; overhead {s['py_overhead_per_call_b32_ms']:+.2f} ms per call), "
          f"sentence-transformers {s['st_b32_per_s']:.1f}/s ({s['py_vs_st_b32']:.2f}x)")
    print(f"batch 1: nest CLI {s['cli_b1_ms']:.2f} ms, nest in Python {s['py_b1_ms']:.2f} ms "
          f"(overhead {s['py_overhead_per_call_b1_ms']:+.2f} ms per call), sentence-transformers {s['st_b1_ms']:.2f} ms")
    for lib, m in figures["memory"].items():
        print(f"RSS {lib}: import {m['import_mib']:.0f} MiB, loaded {m['loaded_mib']:.0f}, "
              f"after encoding {m['after_encode_mib']:.0f}, peak {m['peak_mib']:.0f} (output {m['output_mib']:.1f})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
