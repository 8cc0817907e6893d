#!/usr/bin/env bash
# Issue 40: mining against a corpus of a million texts through a Nest index (`--corpus-index`)
# next to the in-memory path, on 2 cores. The shared datasets hold 102,868 distinct texts, so
# the corpus joins two of them ("A. B", deterministic, every line distinct): a scale test, not a
# quality one. Both paths mine at a cheap point (layer LAYER, dim DIM; bf16 arithmetic where it
# measured faster: --dtype auto) so that a million texts encode in minutes; the joined texts are
# the corpus's sentences of at most 100 characters:
#   1. `nest index build` over the million texts at that point (float32 level);
#   2. `nest mine --corpus-index` (the corpus read memory-mapped from the index);
#   3. `nest mine` in memory (the corpus encoded again and held);
# each timed with /usr/bin/time -v (wall, peak RSS); then whether the two files agree.
#   scripts/bench/mine_million.sh          (SIZE=1000000 LAYER=2 DIM=128 QUERIES=1000)
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
SIZE=${SIZE:-1000000}
LAYER=${LAYER:-2}
DIM=${DIM:-128}
QUERIES=${QUERIES:-1000}
M=${MODEL:-models/all-MiniLM-L6-v2}
R=runs/mine-million
mkdir -p "$R"
lscpu | grep -E 'Model name' | sed 's/^/# /'
if [ ! -f "$R/corpus.jsonl" ]; then
  python3 - "$R" "$SIZE" "$QUERIES" <<'EOF'
import json, os, sys
sys.path.insert(0, "scripts/bench")
import bench_mine
out, size, nq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# short texts only (SNLI / STS-like sentences; no abstracts), so that a million encode in minutes
base = [t for t in bench_mine.corpus_texts(200000) if len(t) <= 100]
n = len(base)
seen = set()
with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as f:
    i = 0
    while len(seen) < size:
        a, b = base[i % n], base[(i * 7919 + i // n + 1) % n]
        t = f"{a} {b}"
        i += 1
        if t in seen:
            continue
        seen.add(t)
        f.write(json.dumps({"id": f"d{len(seen)}", "text": t}) + "\n")
with open(os.path.join(out, "queries.jsonl"), "w", encoding="utf-8") as f:
    for a, p in bench_mine.pairs(nq):
        f.write(json.dumps({"anchor": a, "positive": p}) + "\n")
print(f"{len(seen)} texts from {n} distinct ones")
EOF
fi
timed() {
  local name=$1; shift
  /usr/bin/time -v "$@" 2> "$R/$name.log" > /dev/null || { tail -5 "$R/$name.log"; exit 1; }
  local wall rss
  wall=$(grep "Elapsed (wall clock)" "$R/$name.log" | awk '{print $NF}')
  rss=$(grep "Maximum resident" "$R/$name.log" | awk '{print int($NF / 1024)}')
  echo "$name: wall $wall, peak RSS $rss MiB ($(uptime | sed 's/.*load/load/'))"
}
point=(--layer "$LAYER" --dim "$DIM" --precision float32 --dtype auto)
[ -f "$R/idx/index.json" ] || timed "index-build" "$N" index build --model "$M" \
  --input "$R/corpus.jsonl" --out "$R/idx" --layer "$LAYER" --dims "$DIM" --precision float32 --dtype auto
common=(--model "$M" --queries "$R/queries.jsonl" --corpus "$R/corpus.jsonl" --num-negatives 5
  --relative-margin 0.05 --document-prompt '' --overwrite "${point[@]}")
timed "mine-via-index" "$N" mine "${common[@]}" --corpus-index "$R/idx" --output "$R/via-index.jsonl"
timed "mine-in-memory" "$N" mine "${common[@]}" --output "$R/in-memory.jsonl"
"$N" mine "${common[@]}" --corpus-index "$R/idx" --output "$R/via-index.jsonl" \
  --overlap-with "$R/in-memory.jsonl" 2>&1 | grep -E "^overlap" || true
echo "rows: via index $(wc -l < "$R/via-index.jsonl"), in memory $(wc -l < "$R/in-memory.jsonl")"
