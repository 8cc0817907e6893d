#!/usr/bin/env bash
# The SMEC side-by-side of docs/COMPRESSION.md: every method on SciFact (BEIR layout) with
# all-MiniLM-L6-v2 (384) and all-mpnet-base-v2 (768) embeddings, trained on 80% of the train
# qrels' queries, stopped and chosen on the other 20%, scored once on test. SMEC runs first;
# the parallel methods then get the same number of epochs SMEC used in total (SMEC section 4).
# Then S-XBM's memory-size trade-off (Table 3) on MiniLM. Resumable: finished adaptors are kept.
#
#   scripts/evidence/evidence_smec.sh [minilm|mpnet ...]        then: python3 scripts/evidence/smec_tables.py
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${NEST:-target/release/nest}
T=${THREADS:-1}
D=${NEST_DATA:-../shared/datasets}
for m in ${*:-minilm mpnet}; do
  case $m in
    minilm) model=models/all-MiniLM-L6-v2; dims=384,192,96,48 ;;
    mpnet) model=models/all-mpnet-base-v2; dims=768,384,192,96 ;;
    *) echo "unknown model $m" >&2; exit 2 ;;
  esac
  run() { # name method [flags...]
    local name=$1 method=$2; shift 2
    [ -f "adaptors/$m-$name/adaptor.json" ] && return
    /usr/bin/time -f "$m-$name: %e s" $N --threads "$T" compress --method "$method" --dims "$dims" \
      --model "$model" --beir "$D/scifact" --out "adaptors/$m-$name" "$@"
  }
  run smec smec
  E=$(python3 -c "import json;print(len(json.load(open('adaptors/$m-smec/adaptor.json'))['info']['history']))")
  echo "$m: SMEC used $E epochs; parallel methods get $E"
  run truncate truncate
  run pca pca
  for meth in search-adaptor matryoshka-adaptor mrl mrl+ads mrl+sxbm; do run "$meth" "$meth" --epochs "$E"; done
  run mrl+smrl mrl+smrl
  if [ "$m" = minilm ]; then
    for s in 1000 2000 10000 15000; do run "smec-mem$s" smec --memory-size "$s"; done
  fi
done
