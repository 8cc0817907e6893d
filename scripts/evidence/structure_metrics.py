"""Code-structure figures of the workspace, for issue 19's before/after table.

    python3 scripts/evidence/structure_metrics.py [ROOT] [--list]

Counted in non-test code (a file's text from its first `#[cfg(test)]` on is left out) of
crates/*/src:
- import circles: strongly connected groups of modules (a file is a module; `foo/mod.rs` is
  `foo`) linked by `use crate::x` / `crate::x::` / `super::` paths, one row per group; a child's
  `use super::X` back to the parent that declares it counts like any other edge.
- functions over 80 lines: from the `fn` line to its closing brace (strings, chars and comments
  skipped); "unexplained" = without a comment containing "long" or "reason" in the 3 lines above.
- files over 400 lines (whole file, tests included).
- plain `pub` items of nest-train (fn, struct, enum, trait, type, const, static, mod, use, and
  struct fields), not `pub(crate)` / `pub(super)`.
- places that L2-normalise by hand (a norm divided out: `norm_scalaropt_dim`, `.norm(`, a square
  root of a sum of squares) outside the two owners (nest_model::pooling::l2_normalize,
  nest_core::vector), and functions that range-check dims or layers (named check_dims /
  check_layers / validate_dims) outside nest_core::spec.
Blind spots: macros, nested functions counted inside their parent, `use` groups spanning lines
only by their first path segment.
"""
import json
import os
import re
import sys


def strip(text):
    """Text with strings, chars and comments blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == '"' or (c == "r" and re.match(r'r#*"', text[i:i + 3] or "")):
            m = re.match(r'r(#*)"', text[i:])
            if m:
                end = '"' + m.group(1)
                j = text.find(end, i + len(m.group(0)))
                j = n if j < 0 else j + len(end)
            else:
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4] or ""):
            m = re.match(r"'(\\[^']*|[^\\'])'", text[i:])
            j = i + (len(m.group(0)) if m else 1)
            out.append(" " * (j - i)); i = j
        else:
            out.append(c); i += 1
    return "".join(out)


def non_test(text):
    k = text.find("#[cfg(test)]")
    return text if k < 0 else text[:k]


def modules(src_dir):
    mods = {}
    for dirpath, _, files in os.walk(src_dir):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src_dir)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib", "main"):
                rel = rel[:-1]
            mods["::".join(rel)] = os.path.join(dirpath, f)
    return mods


def edges(mods):
    out = {m: set() for m in mods}
    for m, path in mods.items():
        code = strip(non_test(open(path, encoding="utf-8").read()))
        parent = m.rsplit("::", 1)[0] if "::" in m else ""
        targets = [p for p in re.findall(r"crate::([a-z_][a-z0-9_:]*)", code)]
        targets += [(parent + "::" if parent else "") + p
                    for p in re.findall(r"\bsuper::([a-z_][a-z0-9_:]*)", code)]
        if re.search(r"\bsuper::\{", code) or re.search(r"\buse super::\*", code):
            targets.append(parent)
        for t in targets:
            parts = [x for x in t.split("::") if x]
            while parts and "::".join(parts) not in mods:
                parts.pop()
            tgt = "::".join(parts)
            if tgt in mods and tgt != m and tgt != "":
                out[m].add(tgt)
    return out


def sccs(graph):
    index, low, stack, on, res, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                res.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return res


def long_functions(path):
    raw = open(path, encoding="utf-8").read()
    text = strip(non_test(raw))
    lines = text.split("\n")
    rawlines = raw.split("\n")
    found = []
    for i, line in enumerate(lines):
        m = re.match(r"\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)", line)
        if not m:
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            depth += lines[j].count("{") - lines[j].count("}")
            started = started or "{" in lines[j]
            if started and depth <= 0:
                break
            if not started and lines[j].rstrip().endswith(";"):
                break
            j += 1
        if started and j - i + 1 > 80:
            above = " ".join(rawlines[max(0, i - 4):i]).lower()
            explained = "//" in above and ("long" in above or "reason" in above)
            found.append((m.group(6), i + 1, j - i + 1, explained))
    return found


NORM = re.compile(r"norm_scalaropt_dim|\.norm\(\)|sqrt\(\)\s*\.max\(1e-12\)|\.sum::<f32>\(\)\s*\.sqrt\(\)")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else "."
    show = "--list" in sys.argv
    crates = sorted(d for d in os.listdir(os.path.join(root, "crates")))
    rows, detail = [], []
    tot = dict(circles=0, long=0, unexplained=0, big=0, norm=0, checks=0)
    for c in crates:
        src = os.path.join(root, "crates", c, "src")
        mods = modules(src)
        circ = sccs(edges(mods))
        longs, big, norm, checks = [], [], [], []
        for m, p in mods.items():
            rel = os.path.relpath(p, root)
            raw = open(p, encoding="utf-8").read()
            if raw.count("\n") > 400:
                big.append(f"{rel} ({raw.count(chr(10))})")
            for name, line, n, ok in long_functions(p):
                longs.append((f"{rel}:{line} {name} ({n})", ok))
            code = strip(non_test(raw))
            # the two owners; AdamW's gradient-norm clipping and L-BFGS's first step size use a
            # norm without normalising anything
            owner = rel.endswith(("nest-model/src/pooling.rs", "nest-core/src/vector.rs",
                                  "nest-model/src/optim.rs", "nest-train/src/optim.rs",
                                  "nest-eval/src/metrics/classify.rs"))
            for k, l in enumerate(code.split("\n")):
                if NORM.search(l) and not owner:
                    norm.append(f"{rel}:{k + 1}")
                if re.search(r"fn (check_dims|check_layers|validate_dims)\b", l) and "nest-core/src/spec.rs" not in rel:
                    checks.append(f"{rel}:{k + 1}")
        pub = 0
        if c == "nest-train":
            for p in mods.values():
                code = strip(non_test(open(p, encoding="utf-8").read()))
                pub += len(re.findall(r"(?m)^\s*pub\s+(?!\()", code))
        unexplained = sum(1 for _, ok in longs if not ok)
        rows.append((c, len(circ), len(longs), unexplained, len(big), pub if c == "nest-train" else "", len(norm), len(checks)))
        for k, v in (("circles", len(circ)), ("long", len(longs)), ("unexplained", unexplained),
                     ("big", len(big)), ("norm", len(norm)), ("checks", len(checks))):
            tot[k] += v
        detail.append((c, circ, longs, big, norm, checks))
    if "--json" in sys.argv:
        print(json.dumps({"crates": rows, "total": tot}))
        return
    print("| crate | import circles | fns > 80 lines | of them unexplained | files > 400 lines | plain `pub` items | hand-written L2 norms | dims/layers checks outside nest-core |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    print(f"| **total** | {tot['circles']} | {tot['long']} | {tot['unexplained']} | {tot['big']} | | {tot['norm']} | {tot['checks']} |")
    if show:
        for c, circ, longs, big, norm, checks in detail:
            for x in circ:
                print(f"{c}: circle {' <-> '.join(x)}")
            for x, ok in longs:
                print(f"{c}: long {x}{' (reason given)' if ok else ''}")
            for x in big:
                print(f"{c}: big {x}")
            for x in norm:
                print(f"{c}: norm {x}")
            for x in checks:
                print(f"{c}: check {x}")


if __name__ == "__main__":
    main()
