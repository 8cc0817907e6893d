#!/usr/bin/env python3
"""Sums a profiler trace of `nest bench encode --profile DIR` (Chrome trace JSON written by
libtorch's Kineto profiler, `crates/nest-model/src/profile.rs`): where a pass's time went.

On a GPU: the device's span from its first kernel or copy to its last, how much of it the
device was busy (kernels, copies, memsets; overlaps counted once) and idle, the idle gaps by
size, and the kernels that took the most time. On a CPU trace (no device events): the host
operators that took the most time.

    python3 scripts/gpu/trace_summary.py DIR/*.json [--top 15]

Standard library only (the GPU machine has no network).
"""

import argparse
import collections
import json
import sys

DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")


def busy_union(intervals):
    """Total length of the union of (start, end) intervals, and the gaps between them."""
    total, gaps, end = 0.0, [], None
    for s, e in sorted(intervals):
        if end is None or s > end:
            if end is not None:
                gaps.append(s - end)
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total, gaps


def summarise(path, top):
    with open(path) as f:
        trace = json.load(f)
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
    device = [e for e in events if e.get("cat") in DEVICE]
    host = [e for e in events if e.get("cat") == "cpu_op"]
    lines = [f"## {path}"]
    if host:
        h0 = min(e["ts"] for e in host)
        h1 = max(e["ts"] + e["dur"] for e in host)
        lines.append(f"host operators: {len(host)}, from first to last {(h1 - h0) / 1e3:.2f} ms")
    if not device:
        lines.append("no device events (a CPU trace): the host operators that took the most time")
        by = collections.defaultdict(lambda: [0, 0.0])
        for e in host:
            by[e["name"]][0] += 1
            by[e["name"]][1] += e["dur"]
        for name, (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
            lines.append(f"  {us / 1e3:9.3f} ms  {n:6d} x  {name}")
        return "\n".join(lines)
    span0 = min(e["ts"] for e in device)
    span1 = max(e["ts"] + e["dur"] for e in device)
    span = span1 - span0
    busy, gaps = busy_union([(e["ts"], e["ts"] + e["dur"]) for e in device])
    counts = collections.Counter(e["cat"] for e in device)
    lines.append(
        f"device: span {span / 1e3:.3f} ms, busy {busy / 1e3:.3f} ms ({100 * busy / span:.1f}%), "
        f"idle {(span - busy) / 1e3:.3f} ms; "
        + ", ".join(f"{counts[c]} {c}" for c in DEVICE if counts[c])
    )
    kernels = [e for e in device if e["cat"] == "kernel"]
    if kernels:
        mean = sum(e["dur"] for e in kernels) / len(kernels)
        lines.append(f"kernels: {len(kernels)}, mean {mean:.2f} us")
    for lo, hi in [(0, 5), (5, 20), (20, 100), (100, 1e300)]:
        g = [x for x in gaps if lo <= x < hi]
        label = f"{lo:g}-{hi:g} us" if hi < 1e300 else f">= {lo:g} us"
        lines.append(f"  idle gaps {label:>12}: {len(g):6d}, {sum(g) / 1e3:8.3f} ms")
    by = collections.defaultdict(lambda: [0, 0.0])
    for e in device:
        by[(e["cat"], e["name"][:90])][0] += 1
        by[(e["cat"], e["name"][:90])][1] += e["dur"]
    lines.append(f"the {top} device items that took the most time:")
    for (cat, name), (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"  {us / 1e3:9.3f} ms  {n:6d} x  {us / n:8.2f} us  {cat:10}  {name}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    for p in a.traces:
        try:
            print(summarise(p, a.top))
        except (OSError, ValueError, KeyError) as e:
            print(f"{p}: not a readable trace ({e})", file=sys.stderr)
            return 1
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
