"""The Python side of scripts/gpu/gpu_issue41.sh (issue 41): small checks and the closing summary.

    python3 scripts/gpu/gpu_issue41_report.py fixture RUN_DIR OUT.json     # CPU losses -> fixture
    python3 scripts/gpu/gpu_issue41_report.py tokens MODEL DATA.tsv OUT.json [MAX_LEN]
    python3 scripts/gpu/gpu_issue41_report.py numerics FIXTURE GPU_RUN RESUMED_RUN OUT.json [RESUMED_AT]
    python3 scripts/gpu/gpu_issue41_report.py evaldiff BASE/report.json OTHER/report.json OUT.json
    python3 scripts/gpu/gpu_issue41_report.py summary OUT_DIR               # the closing tables

Needs only the standard library, except `tokens` (transformers) and `numerics`' weight
comparison (safetensors + torch).
"""
import glob
import json
import os
import re
import sys

# GPU float32 against CPU float32, 200 steps of MRL(MNRL) at lr 2e-5, dropout off, stated before
# the run: step 1 (same weights, same batch, no update yet) must agree to float32 summation order,
# 1e-4; every later step within 1e-2 (on the CPU, rounding the start weights to float16, a change
# of ~1e-3 relative per weight, moved the 200 losses by at most 2.0e-3, mean 4.6e-4: a GPU's
# different summation order is a far smaller perturbation). Resume on one device: bit-exact is the
# claim for the CPU (docs/TRAINING.md); on a GPU any difference is reported, not judged.
TOL_STEP1 = 1e-4
TOL_ANY = 1e-2
TOL_RESUME = 0.0


def read_metrics(run):
    rows = {}
    for line in open(os.path.join(run, "metrics.jsonl")):
        r = json.loads(line)
        if "step" in r and "loss" in r:
            rows[int(r["step"])] = r
    return rows


def fixture(run, out):
    m = read_metrics(run)
    steps = sorted(m)
    doc = {
        "what": "per-step losses of `nest train --recipe recipes/gpu-numerics-mrl.toml` on the CPU "
                "(scripts/gpu/gpu_issue41.sh section 6 compares a GPU run with them)",
        "recipe": open(os.path.join(run, "recipe.toml")).read(),
        "steps": steps,
        "loss": [m[s]["loss"] for s in steps],
        "grad_norm": [m[s].get("grad_norm") for s in steps],
    }
    w = os.path.join(run, "final", "model.safetensors")
    if os.path.exists(w):
        from safetensors.torch import load_file

        d = load_file(w)
        # a sample of the final weights (the first 8 values of every tensor) and each tensor's sum
        doc["weights_sample"] = {k: [float(x) for x in v.flatten()[:8]] for k, v in sorted(d.items())
                                 if v.is_floating_point()}
        doc["weights_sum"] = {k: float(v.double().sum()) for k, v in sorted(d.items()) if v.is_floating_point()}
    with open(out, "w") as f:
        json.dump(doc, f, indent=0)
    print(f"wrote {out}: {len(steps)} steps, last loss {doc['loss'][-1]:.6f}")


def tokens(model, data, out, max_len=None):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    if max_len is None:
        p = os.path.join(model, "sentence_bert_config.json")
        max_len = json.load(open(p)).get("max_seq_length", 512) if os.path.exists(p) else 512
    rows = [line.rstrip("\n").split("\t") for line in open(data, encoding="utf-8")][1:]
    texts = [s for r in rows for s in r[:2]]
    n = [len(ids) for ids in tok(texts, truncation=True, max_length=int(max_len))["input_ids"]]
    doc = {"model": model, "sentences": len(n), "mean_tokens": sum(n) / len(n), "max_tokens": max(n),
           "max_length": int(max_len)}
    json.dump(doc, open(out, "w"))
    print(json.dumps(doc))


def numerics(fixture_path, gpu_run, resumed_run, out, at="100"):
    at = int(at)
    fx = json.load(open(fixture_path))
    cpu = dict(zip(fx["steps"], fx["loss"]))
    doc = {"tolerances": {"step1_abs": TOL_STEP1, "any_step_abs": TOL_ANY, "resume_abs": TOL_RESUME}}
    g = read_metrics(gpu_run) if os.path.exists(os.path.join(gpu_run, "metrics.jsonl")) else {}
    common = sorted(set(cpu) & set(g))
    if common:
        d = [(s, abs(g[s]["loss"] - cpu[s])) for s in common]
        worst = max(d, key=lambda x: x[1])
        doc["gpu_vs_cpu"] = {
            "steps": len(common), "step1_abs": d[0][1] if d[0][0] == 1 else None,
            "max_abs": worst[1], "max_at_step": worst[0], "mean_abs": sum(x for _, x in d) / len(d),
            "max_abs_first_10": max(x for s, x in d if s <= 10),
            "last_loss_gpu": g[common[-1]]["loss"], "last_loss_cpu": cpu[common[-1]],
            "pass": (d[0][1] <= TOL_STEP1) and worst[1] <= TOL_ANY,
        }
        w = os.path.join(gpu_run, "final", "model.safetensors")
        if os.path.exists(w) and "weights_sample" in fx:
            from safetensors.torch import load_file

            t = load_file(w)
            diffs = [abs(float(a) - b) for k, vals in fx["weights_sample"].items() if k in t
                     for a, b in zip(t[k].flatten()[:8], vals)]
            doc["gpu_vs_cpu"]["final_weights_sample_max_abs"] = max(diffs) if diffs else None
    else:
        doc["gpu_vs_cpu"] = {"error": f"no common steps (gpu run {gpu_run}: {len(g)} steps)"}
    r = read_metrics(resumed_run) if os.path.exists(os.path.join(resumed_run, "metrics.jsonl")) else {}
    later = sorted(s for s in set(r) & set(g) if s > at)
    if later:
        d = [abs(r[s]["loss"] - g[s]["loss"]) for s in later]
        res = {"steps_compared": f"{later[0]}-{later[-1]} ({len(later)})", "loss_max_abs": max(d),
               "bit_exact_losses": all(r[s]["loss"] == g[s]["loss"] for s in later)}
        wa, wb = (os.path.join(x, "final", "model.safetensors") for x in (gpu_run, resumed_run))
        if os.path.exists(wa) and os.path.exists(wb):
            from safetensors.torch import load_file

            a, b = load_file(wa), load_file(wb)
            res["final_weights_max_abs"] = max(float((a[k].double() - b[k].double()).abs().max()) for k in a
                                               if a[k].is_floating_point())
        doc["resume"] = res
    else:
        doc["resume"] = {"error": f"no steps > {at} in both runs ({resumed_run}: {len(r)} steps)"}
    json.dump(doc, open(out, "w"), indent=1)
    print(json.dumps(doc))


def cells(report):
    r = json.load(open(report))
    out = {}
    for t in r["tasks"]:
        for c in t["cells"]:
            out[(t["task"], c["layer"], c["dim"], c["precision"])] = c["metrics"][t["main_metric"]]
    return out


def evaldiff(base, other, out):
    a, b = cells(base), cells(other)
    rows, per_task = [], {}
    for k in sorted(set(a) & set(b)):
        d = b[k] - a[k]
        rows.append({"task": k[0], "layer": k[1], "dim": k[2], "precision": k[3], "base": a[k], "other": b[k],
                     "delta": d})
        pt = per_task.setdefault(k[0], {"cells": 0, "max_abs_delta": 0.0, "sum_delta": 0.0})
        pt["cells"] += 1
        pt["sum_delta"] += d
        if abs(d) >= pt["max_abs_delta"]:
            pt["max_abs_delta"], pt["max_at"] = abs(d), f"L{k[1]} d{k[2]}"
    for t, pt in per_task.items():
        pt["mean_delta"] = pt.pop("sum_delta") / pt["cells"]
        full = [r for r in rows if r["task"] == t]
        top = max(full, key=lambda r: (r["layer"], r["dim"]))
        pt["full_point"] = f"L{top['layer']} d{top['dim']}: {top['base']:.2f} -> {top['other']:.2f}"
    json.dump({"base": base, "other": other, "per_task": per_task, "cells": rows}, open(out, "w"), indent=1)
    print(json.dumps(per_task))


# ---------------------------------------------------------------- summary
def squash(line, n=200):
    return re.sub(r"\s+", " ", line.strip())[:n]


def md_rows(path, keys):
    if not os.path.exists(path):
        return []
    return [line for line in open(path) if line.startswith("|") and any(k in line for k in keys)]


def mem_line(path):
    if not os.path.exists(path):
        return "mem: -"
    m = json.load(open(path))
    if "skipped" in m:
        return f"mem: {m['skipped']}"
    parts = []
    for pid, p in sorted(m["pids"].items(), key=lambda x: -x[1]["peak_mib"]):
        cmd = p["cmd"]
        who = ("st-peer" if "bench_st.py" in cmd else "torch-peer" if "bench_train.py" in cmd
               else "st-server" if "peer_st_server" in cmd else "nest" if re.search(r"(^|/)nest( |$)", cmd)
               else "torchrun" if "torch.distributed" in cmd or "torchrun" in cmd else cmd[:30] or "?")
        parts.append(f"{who}[{pid}] {p['peak_mib']:.0f}")
    gp = m.get("gpu_used_peak_mib")
    return f"mem MiB peak: {', '.join(parts) or 'no pids seen'}; whole GPU {gp if gp is None else f'{gp:.0f}'}"


def encode_table(path, mean_tokens=None):
    """The table `nest bench encode` prints, compacted: layer, run, sentences/s, against the
    fastest peer and against the deepest layer."""
    out, head = [], None
    for line in open(path):
        if "tokenising the" in line:  # the host's share: library, words cold (all, ahead, first) / warm
            out.append("tokenising: " + line.split("alone:", 1)[-1].strip())
            continue
        if "had queued every batch at" in line:  # the host's part of a timed pass, per layer
            out.append("host: " + re.sub(r"\s+", " ", line.strip())[:140])
            continue
        if "the host's phases:" in line:  # waits for tokens, batches queued, the finish
            out.append("phases: " + re.sub(r"\s+", " ", line.strip())[:260])
            continue
        if "the batches' tokens:" in line:  # real and padded tokens of the best pass
            out.append("tokens: " + re.sub(r"\s+", " ", line.strip())[:160])
            continue
        if "peak GPU memory (" in line:  # each side's caching allocator (nest bench encode, bench_st.py)
            out.append("memory " + line.strip()[:150])
            continue
        if line.startswith("Measured on "):
            out.append(line.strip()[:240])
            continue
        if not line.startswith("|"):
            continue
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if cols and cols[0] == "layer":
            head = cols
            continue
        if head is None or not cols or not cols[0].isdigit():
            continue
        r = dict(zip(head, cols))
        deep = next((k for k in head if k.startswith("vs layer")), None)
        out.append(f"L{r.get('layer')} {r.get('run', '?')[:38]:38s} {r.get('sent/s', '?'):>9s}/s"
                   f"  vs peer {r.get('vs fastest peer', '-'):>6s}  {deep or ''} {r.get(deep, '-') if deep else ''}"
                   + (f"  {float(r['sent/s'].replace(',', '')) * mean_tokens:,.0f} tok/s"
                      if mean_tokens and r.get("sent/s", "").replace(",", "").replace(".", "").isdigit() else ""))
    return out


def encode_rates(path, padded=None):
    """From a `nest bench encode` log: the sentence count, and {(run, layer): sentences/s};
    with a dict `padded`, also {(run, layer): padded tokens of the best pass} into it."""
    count, rates, head = None, {}, None
    for line in open(path):
        m = re.search(r"tokenising the (\d+) sentences", line)
        if m and count is None:
            count = int(m.group(1))
        m = re.match(r"\s+(.*) layer (\d+): the batches' tokens: (\d+) real in (\d+) padded", line)
        if m and padded is not None:
            padded[(m.group(1), int(m.group(2)))] = int(m.group(4))
        if not line.startswith("|"):
            continue
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if cols and cols[0] == "layer":
            head = cols
        elif head and cols and cols[0].isdigit():
            r = dict(zip(head, cols))
            try:
                rates[(r.get("run", "?"), int(r["layer"]))] = float(r["sent/s"].replace(",", ""))
            except (KeyError, ValueError):
                pass
    return count, rates


def fixed_and_marginal(small, large):
    """Two encodes of one model at one batch size, of n1 and n2 sentences of one shuffled set,
    each a pass's time t = F + n m: its cost a sentence m, what each further sentence of a
    corpus costs, and F, what the small encode pays beyond n1 m: the fixed part (the first
    block's wait, the finish) and the extra padding of its batches, whose length spans are
    wider when fewer texts are sorted into them. Layer 3 / 6 of m is early exit's ratio over a
    corpus. Lines to print (none without both logs' counts and rates)."""
    if not (os.path.exists(small) and os.path.exists(large)):
        return []
    p1, p2 = {}, {}
    (n1, r1), (n2, r2) = encode_rates(small, p1), encode_rates(large, p2)
    if not n1 or not n2 or n2 <= n1:
        return []
    out = []
    for run in sorted({k[0] for k in r1} & {k[0] for k in r2}):
        if not run.startswith("nest"):
            continue
        per = {}
        for layer in sorted({k[1] for k in r1 if k[0] == run} & {k[1] for k in r2 if k[0] == run}):
            t1, t2 = n1 / r1[(run, layer)], n2 / r2[(run, layer)]
            m = (t2 - t1) / (n2 - n1)
            per[layer] = (t1 - n1 * m, m)
            out.append(f"{run} L{layer}: {n1} sentences {t1 * 1e3:.1f} ms, {n2} {t2 * 1e3:.1f} ms -> "
                       f"{m * 1e6:.2f} us a sentence + {per[layer][0] * 1e3:.2f} ms (fixed, padding) "
                       f"({1 / m if m > 0 else float('inf'):,.0f} sentences/s over a corpus)")
            # by padded tokens instead (a recorded pass computes its padding): t = F + c P
            q1, q2 = p1.get((run, layer)), p2.get((run, layer))
            if q1 and q2 and q2 > q1:
                c = (t2 - t1) / (q2 - q1)
                out.append(f"{run} L{layer}: padded tokens {q1} and {q2} -> {c * 1e9:.1f} ns a padded "
                           f"token + {(t1 - c * q1) * 1e3:.2f} ms fixed")
        if len(per) >= 2:
            lo, hi = min(per), max(per)
            if per[lo][1] > 0:
                out.append(f"{run}: layer {lo} / {hi} a sentence {per[hi][1] / per[lo][1]:.2f}x "
                           f"(whole encodes: {r1[(run, lo)] / r1[(run, hi)]:.2f}x at {n1}, "
                           f"{r2[(run, lo)] / r2[(run, hi)]:.2f}x at {n2})")
    return out


def summary(o):
    print("\n================ issue 41 summary (" + o + ") ================")
    st = os.path.join(o, "status.tsv")
    if os.path.exists(st):
        print("section | status | seconds | note")
        for line in open(st):
            print(" | ".join(line.rstrip("\n").split("\t")))
    print("\n-- 1. training step, MiniLM (bench train; b=batch, g=cuda graph)")
    for f in sorted(glob.glob(os.path.join(o, "s1", "train_*.md"))):
        tag = os.path.basename(f)[6:-3]
        for line in md_rows(f, ["median (vs plain", "one epoch", "achieved"]):
            print(f"{tag}: {squash(line)}")
    for sec, title in (("s2", "2. early exit, MiniLM encode"), ("s3", "3. production shapes encode")):
        print(f"\n-- {title}")
        for f in sorted(glob.glob(os.path.join(o, sec, "encode_*.log"))):
            tf = os.path.join(o, sec, "tokens_" + os.path.basename(f)[7:-4].rsplit("_b", 1)[0] + ".json")
            rows = encode_table(f, json.load(open(tf))["mean_tokens"] if os.path.exists(tf) else None)
            print(f"{os.path.basename(f)[7:-4]}:" + ("" if rows else " no table (see the log)"))
            for r in rows:
                print("  " + r)
        for f in sorted(glob.glob(os.path.join(o, sec, "encode_corpus_b*.log"))):
            # a sample of 2,758 sentences against all 17,256: cost a sentence, and the rest
            small = os.path.join(o, sec, "encode_sample_b" + f.rsplit("_b", 1)[1])
            rows = fixed_and_marginal(small, f)
            print(f"per sentence and fixed, batch {f.rsplit('_b', 1)[1][:-4]}:" + ("" if rows else " -"))
            for r in rows:
                print("  " + r)
        for f in sorted(glob.glob(os.path.join(o, sec, "trace_summary_*.log"))):
            # a profiled pass per layer: the device's busy and idle time, its kernel count
            for line in open(f):
                if line.startswith(("## ", "device:", "kernels:")):
                    print("  trace " + line.strip().replace(o, "")[:200])
        for f in sorted(glob.glob(os.path.join(o, sec, "tokens_*.json"))):
            t = json.load(open(f))
            print(f"  tokens {os.path.basename(f)[7:-5]}: mean {t['mean_tokens']:.1f} per sentence "
                  f"(max {t['max_tokens']}, {t['sentences']} sentences): tokens/s = sentences/s x {t['mean_tokens']:.1f}")
    print("\n-- 8. MPNet-shape training step (bench train)")
    for f in sorted(glob.glob(os.path.join(o, "s8", "train_*.md"))):
        tag = os.path.basename(f)[6:-3]
        for line in md_rows(f, ["median (vs plain", "one epoch"]):
            print(f"{tag}: {squash(line)}")
    print("\n-- 10. GradCache at batch 256 in chunks of 32 (bench train; g=chunk graphs)")
    for f in sorted(glob.glob(os.path.join(o, "s10", "gc_*.md"))):
        tag = os.path.basename(f)[3:-3]
        for line in md_rows(f, ["median (vs plain", "one epoch", "peak GPU"]):
            print(f"{tag}: {squash(line)}")
    print("\n-- 12. 2DMSE, MIC, MIPIC and IBKD steps, MiniLM (bench train; goff: every objective "
          "eager, gon: mrl,2dmse,mic recorded, gon_new: mrl,mipic,ibkd recorded)")
    for f in sorted(glob.glob(os.path.join(o, "s12", "train2d_*.md"))):
        tag = os.path.basename(f)[8:-3]
        for line in md_rows(f, ["median (vs plain", "x MRL", "peak GPU"]):
            print(f"{tag}: {squash(line)}")
    f = os.path.join(o, "s12", "accum.txt")
    if os.path.exists(f):
        print(open(f).read().strip())
    f = os.path.join(o, "s13", "oom.txt")
    if os.path.exists(f):
        print("\n-- 13. out of memory (nest train's error; nest encode's batch in halves)")
        print("\n".join(squash(l, 420) for l in open(f).read().strip().splitlines()))
    print("\n-- 11. graph memory pools (private vs NEST_GRAPH_POOL=shared)")
    f = os.path.join(o, "model_gpu_tests.txt")
    if os.path.exists(f):
        print("nest-model's GPU tests (run by section 4 or 11):")
        print(open(f).read().strip())
    f = os.path.join(o, "s11", "pools.txt")
    if os.path.exists(f):
        print(open(f).read().strip())
    for f in sorted(glob.glob(os.path.join(o, "s11", "encode_*.log"))):
        rows = encode_table(f)
        print(f"{os.path.basename(f)[7:-4]}:" + ("" if rows else " no table (see the log)"))
        for r in rows:
            print("  " + r)
    print("\n-- 4. serve, 64 clients")
    for f in sorted(glob.glob(os.path.join(o, "s4", "serve_*.log"))):
        for line in open(f):
            if line.startswith("{"):
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                keys = [k for k in j if any(s in k for s in ("label", "per_s", "p50", "p99", "errors", "rss"))]
                print("  " + ", ".join(f"{k}={j[k]:.1f}" if isinstance(j[k], float) else f"{k}={j[k]}" for k in keys)[:300])
    # a server's warnings (a recording that failed and fell back to eager passes, a worker left
    # on the default stream): the figures beside them are not the recorded path's
    for f in sorted(glob.glob(os.path.join(o, "s4", "server_nest_*.log"))):
        for line in open(f):
            if "warning" in line.lower():
                print(f"  {os.path.basename(f)}: {line.strip()[:240]}")
    print("\n-- 5. eval bf16 vs float32, cell by cell (Spearman x100)")
    f = os.path.join(o, "s5", "evaldiff.json")
    if os.path.exists(f):
        for t, pt in json.load(open(f))["per_task"].items():
            print(f"  {t}: {pt['cells']} cells, max |delta| {pt['max_abs_delta']:.2f} at {pt['max_at']}, "
                  f"mean {pt['mean_delta']:+.3f}; {pt['full_point']}")
    print("\n-- 6. numerics: GPU vs CPU losses, resume")
    f = os.path.join(o, "s6", "numerics.json")
    if os.path.exists(f):
        d = json.load(open(f))
        print("  tolerances: " + json.dumps(d["tolerances"]))
        print("  gpu vs cpu: " + json.dumps(d.get("gpu_vs_cpu"))[:400])
        print("  resume:     " + json.dumps(d.get("resume"))[:400])
    print("\n-- 7. NCCL")
    f = os.path.join(o, "s7", "nccl.txt")
    if os.path.exists(f):
        print(open(f).read().strip()[-1500:])
    print("\n-- peak GPU memory per process (MiB; nvidia-smi every 0.1 s)")
    for f in sorted(glob.glob(os.path.join(o, "s*", "mem_*.json"))):
        print(f"{os.path.relpath(f, o)[:-5]}: {mem_line(f)}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"fixture": fixture, "tokens": tokens, "numerics": numerics, "evaldiff": evaldiff, "summary": summary}[cmd](*args)


if __name__ == "__main__":
    main()
