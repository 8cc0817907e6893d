#!/usr/bin/env bash
# Does a refactor change results? Runs the same small trainings and compressions with two nest
# binaries (e.g. one built from the commit before the change, one after) and compares every
# logged training step (loss, gradient norm, lr, each term), the final weights and the adaptors,
# bit for bit. Tiny models from tests/fixtures; about a minute on 2 cores with debug builds.
#
#   git worktree add /tmp/old <commit> && (cd /tmp/old && cargo build --bin nest)
#   scripts/bench/same_results.sh /tmp/old/target/debug/nest target/debug/nest
#   MODEL=models/all-MiniLM-L6-v2 scripts/bench/same_results.sh OLD NEW
set -euo pipefail
OLD=$(realpath "$1"); NEW=$(realpath "$2")
root=$(cd "$(dirname "$0")/../.." && pwd)
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
# MODEL: any model both binaries read (default the tiny XLM-R; binaries from before XLM-R
# support, 2026-11-23, need a BERT such as models/all-MiniLM-L6-v2)
model=$(realpath "${MODEL:-$root/tests/fixtures/xlmr-tiny/model}")
printf 'sentence1\tsentence2\tscore\nA man is playing a guitar.\tA man plays the guitar.\t4.6\nA woman is slicing an onion.\tSomeone cuts an onion.\t4.0\nThe cat sat on the mat.\tThe dog sat on the log.\t1.8\nStock markets fell sharply.\tA new species of frog.\t0.1\nHi\tEnd.\t0.5\nThe quick brown fox jumps.\tA fox jumps quickly.\t3.9\nNumbers: 3.14 and 42.\tScientists discovered a frog.\t0.2\nTwo sentences here.\tAnd a second one!\t1.0\n' > "$D/train.tsv"
status=0
for obj in '[{kind = "mrl"}]' '[{kind = "2dmse"}]' '[{kind = "ese", compression_size = 8}]' \
  '[{kind = "mrl"}, {kind = "mic", weight = 0.6}]'; do
  for b in OLD NEW; do
    NEST_DTYPE=float32 ${!b} --threads 1 train --model "$model" --data "$D/train.tsv:scored" \
      --loss cosent --matryoshka-dims '[8, 32]' --batch-size 4 --epochs 3 --lr 1e-3 \
      --save-every 4 --objective "$obj" --run-dir "$D/$b" > /dev/null 2>&1
  done
  python3 - "$D" "$obj" <<'PY' || status=1
import hashlib, json, sys
d, obj = sys.argv[1], sys.argv[2]
rows = lambda b: [json.loads(l) for l in open(f"{d}/{b}/metrics.jsonl")]
o, n = rows("OLD"), rows("NEW")
keys = ["step", "loss", "grad_norm", "lr", "terms"]
same = len(o) == len(n) and all(all(a.get(k) == b.get(k) for k in keys) for a, b in zip(o, n))
h = lambda b: hashlib.sha256(open(f"{d}/{b}/final/model.safetensors", "rb").read()).hexdigest()
print(f"train {obj}: {len(n)} steps, every logged step identical: {same}; "
      f"final weights identical: {h('OLD') == h('NEW')}")
sys.exit(0 if same and h("OLD") == h("NEW") else 1)
PY
  rm -rf "$D/OLD" "$D/NEW"
done
# adaptors on embeddings of 60 texts by the tiny model
for i in $(seq 0 59); do echo "text $i about topic $((i % 7)) and item $((i * 13 % 11))"; done > "$D/docs.txt"
for i in $(seq 0 59); do echo "topic $((i % 7)) item $((i * 13 % 11))"; done > "$D/queries.txt"
NEST_DTYPE=float32 "$NEW" encode --model "$model" --input "$D/docs.txt" --output "$D/c.npy" > /dev/null 2>&1
NEST_DTYPE=float32 "$NEW" encode --model "$model" --input "$D/queries.txt" --output "$D/q.npy" > /dev/null 2>&1
{ echo -e "query-id\tcorpus-id\tscore"; for i in $(seq 0 44); do echo -e "$i\t$i\t1"; done; } > "$D/qrels.tsv"
{ echo -e "query-id\tcorpus-id\tscore"; for i in $(seq 45 59); do echo -e "$i\t$i\t1"; done; } > "$D/test.tsv"
for m in smec matryoshka-adaptor search-adaptor; do
  for b in OLD NEW; do
    ${!b} --threads 1 compress --method $m --dims 32,16,8 --embeddings "$D/c.npy" \
      --queries "$D/q.npy" --qrels "$D/qrels.tsv" --test-qrels "$D/test.tsv" --batch-size 6 \
      --epochs 3 --memory-size 40 --hard-negatives 3 --out "$D/$b-$m" > /dev/null 2>&1
  done
  a=$(sha256sum < "$D/OLD-$m/adaptor.safetensors"); b=$(sha256sum < "$D/NEW-$m/adaptor.safetensors")
  echo "compress $m: adaptor identical: $([ "$a" = "$b" ] && echo True || echo False)"
  [ "$a" = "$b" ] || status=1
done
exit $status
