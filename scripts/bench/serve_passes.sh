#!/usr/bin/env bash
# Issue 41: how a server's batch is cut into forward passes (`nest_serve::batcher::passes`),
# the three rules interleaved: NEST_LENGTH_RUNS=1 (the 25% length runs of before), =0 (one
# pass per batch), and unset (now: one pass on a GPU; on the CPU a cut only where padded
# attention costs). Each run: `nest serve --max-batch-inputs 32 --dtype float32`, WARM (4) s of
# 64 clients, then SECS (10) s measured with `nest bench serve`, on the same machine.
#
#   scripts/bench/serve_passes.sh sts|mix|tiny [ROUNDS]
#     sts   all-MiniLM-L6-v2 at layer 6, STS-B test sentences
#     mix   the same model, 1,400 lines each an STS-B sentence or a SciFact abstract (seeded coin)
#     tiny  a 2-layer 16-wide BERT (random weights made by transformers, MiniLM's tokenizer):
#           passes that cost their launches, as on a GPU; PY (default /work/venv/bin/python)
# Prints one line per run: rule, inputs/s, p50 ms, p99 ms.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
W=${WORK:-runs/serve-passes}
R=${2:-3}
PY=${PY:-/work/venv/bin/python}
mkdir -p "$W"
tail -n +2 ../shared/datasets/stsb/test.tsv | cut -f1 > "$W/sts.txt"
M=models/all-MiniLM-L6-v2 L=6 T=$W/sts.txt
case ${1:-sts} in
  sts) ;;
  mix)
    python3 - "$W" << 'PYEOF'
import json, random, sys
random.seed(0)
sts = [l.rstrip("\n") for l in open(f"{sys.argv[1]}/sts.txt")]
docs = [(d.get("title", "") + " " + d.get("text", "")).replace("\n", " ")
        for d in map(json.loads, open("../shared/datasets/scifact/corpus.jsonl"))]
mix = [sts[i % len(sts)] if random.random() < 0.5 else docs[i] for i in range(1400)]
open(f"{sys.argv[1]}/mix.txt", "w").write("\n".join(mix) + "\n")
PYEOF
    T=$W/mix.txt SECS=${SECS:-15} ;;
  tiny)
    "$PY" - "$W/tiny" "$M" << 'PYEOF'
import json, os, shutil, sys
import torch
from transformers import BertConfig, BertModel
dst, src = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for f in ["tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json",
          "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"]:
    shutil.copy(os.path.join(src, f), dst)
os.makedirs(f"{dst}/1_Pooling", exist_ok=True)
pool = json.load(open(f"{src}/1_Pooling/config.json"))
pool["word_embedding_dimension"] = 16
json.dump(pool, open(f"{dst}/1_Pooling/config.json", "w"))
torch.manual_seed(0)
c = BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=32, max_position_embeddings=512)
BertModel(c, add_pooling_layer=False).save_pretrained(dst, safe_serialization=True)
PYEOF
    M=$W/tiny L=2 ;;
  *) echo "usage: $0 sts|mix|tiny [ROUNDS]" >&2; exit 2 ;;
esac
lscpu | grep -E 'Model name' | sed 's/^/# /'
pid=""
trap '[ -z "$pid" ] || kill $pid 2> /dev/null' EXIT
for _ in $(seq "$R"); do
  for v in 1 0 now; do
    if [ $v = now ]; then E=(env -u NEST_LENGTH_RUNS); else E=(env NEST_LENGTH_RUNS=$v); fi
    "${E[@]}" "$N" serve --model "$M" --port 18090 --allow-any-point --max-batch-inputs 32 \
      --dtype float32 > "$W/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 240); do
      curl -sf localhost:18090/health > /dev/null && break
      kill -0 $pid 2> /dev/null || { tail -3 "$W/server.log" >&2; exit 1; }
      sleep 0.5
    done
    "$N" bench serve --url http://127.0.0.1:18090 --clients 64 --seconds "${WARM:-4}" --texts "$T" \
      --layer $L --label warmup > /dev/null 2>&1
    "$N" bench serve --url http://127.0.0.1:18090 --clients 64 --seconds "${SECS:-10}" --texts "$T" \
      --layer $L --label "rule-$v" 2> /dev/null | tail -1 | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("%s  %.1f inputs/s  p50 %.1f ms  p99 %.1f ms" % (d["label"], d["inputs_per_s"], d["p50_ms"], d["p99_ms"]))'
    kill $pid
    wait $pid 2> /dev/null || true
    pid=""
  done
done
