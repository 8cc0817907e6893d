"""Real-size models with random weights, for the encode-speed comparison of the new backbones
(issue 22; BENCHMARKS.md). transformers initialises each at random (seed 0) with the shape of a
real embedding model, cut to fewer layers to fit a 2-core budget; the tokenizer is the tiny one
of tests/fixtures/<arch>-tiny (vocab_size follows it: the embedding table's size does not change
the per-token cost). Writes runs/bench-models/<name>/ (sentence-transformers folders).

    python scripts/data/make_bench_models.py            # all four
    target/release/nest bench encode --model runs/bench-models/modernbert-base-l6 \\
        --data runs/bench-models/stsb-500.tsv --layers 6 --python /path/to/venv/bin/python

Shapes: xlm-roberta-base (multilingual-e5-base, bge-m3's smaller sibling) at 6 of 12 layers;
ModernBERT-base (gte-modernbert-base, modernbert-embed-base) at 6 of 22; Qwen3-Embedding-0.6B at
4 of 28; EmbeddingGemma-300m at 6 of 24 (its two Dense modules left out).

On a GPU machine (issue 41; scripts/gpu/gpu_issue41.sh) the same shapes at their real depth, plus
all-mpnet-base-v2's (MPNet, 12 x 768; its tokenizer is taken from --mpnet-tokenizer, a BERT
WordPiece one by default, pad id 0: only the shape matters for speed):

    python scripts/data/make_bench_models.py --full-depth --out DIR --only qwen3-0.6b,embeddinggemma,mpnet-base
      # DIR/qwen3-0.6b-l28, DIR/embeddinggemma-l24, DIR/mpnet-base-l12
    --layers N   any depth instead (a dry run on a CPU); --stsb FILE: also write DIR/stsb-500.tsv

Without options nothing changes: the four cut models into runs/bench-models/, and stsb-500.tsv.
"""
import argparse
import os
import shutil

import torch
from sentence_transformers import SentenceTransformer, models
from transformers import (AutoTokenizer, Gemma3TextConfig, Gemma3TextModel, ModernBertConfig,
                          ModernBertModel, MPNetConfig, MPNetModel, Qwen3Config, Qwen3Model,
                          XLMRobertaConfig, XLMRobertaModel)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "runs", "bench-models")


# the real depth of each shape, and the cut one a 2-core budget runs (the default)
FULL = {"xlmr-base": 12, "modernbert-base": 22, "qwen3-0.6b": 28, "embeddinggemma": 24, "mpnet-base": 12}
CUT = {"xlmr-base": 6, "modernbert-base": 6, "qwen3-0.6b": 4, "embeddinggemma": 6}


def shapes(vocab, depth=None):
    """name -> (tokenizer, pooling, class, config); `depth` maps a base name to its layers
    (default CUT: the names and shapes this script always wrote)."""
    d = depth or CUT
    out = {
        f"xlmr-base-l{d['xlmr-base']}": ("xlmr-tiny", "mean", XLMRobertaModel, XLMRobertaConfig(
            vocab_size=vocab["xlmr-tiny"], hidden_size=768, num_hidden_layers=d["xlmr-base"],
            num_attention_heads=12, intermediate_size=3072, max_position_embeddings=514,
            type_vocab_size=1, pad_token_id=1)),
        f"modernbert-base-l{d['modernbert-base']}": ("modernbert-tiny", "mean", ModernBertModel, ModernBertConfig(
            vocab_size=vocab["modernbert-tiny"], hidden_size=768, num_hidden_layers=d["modernbert-base"],
            num_attention_heads=12, intermediate_size=1152, max_position_embeddings=8192,
            pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)),
        f"qwen3-0.6b-l{d['qwen3-0.6b']}": ("qwen3-tiny", "lasttoken", Qwen3Model, Qwen3Config(
            vocab_size=vocab["qwen3-tiny"], hidden_size=1024, num_hidden_layers=d["qwen3-0.6b"],
            num_attention_heads=16, num_key_value_heads=8, head_dim=128, intermediate_size=3072,
            max_position_embeddings=32768, pad_token_id=0, eos_token_id=0)),
        f"embeddinggemma-l{d['embeddinggemma']}": ("gemma3-tiny", "mean", Gemma3TextModel, Gemma3TextConfig(
            vocab_size=vocab["gemma3-tiny"], hidden_size=768, num_hidden_layers=d["embeddinggemma"],
            num_attention_heads=3, num_key_value_heads=1, head_dim=256, intermediate_size=1152,
            query_pre_attn_scalar=256, max_position_embeddings=2048, sliding_window=512,
            use_bidirectional_attention=True, pad_token_id=0, eos_token_id=1, bos_token_id=2)),
    }
    if "mpnet-base" in d:
        out[f"mpnet-base-l{d['mpnet-base']}"] = ("mpnet", "mean", MPNetModel, MPNetConfig(
            vocab_size=30527, hidden_size=768, num_hidden_layers=d["mpnet-base"], num_attention_heads=12,
            intermediate_size=3072, max_position_embeddings=514, relative_attention_num_buckets=32,
            pad_token_id=0, bos_token_id=101, eos_token_id=102))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="models to write (default: the four cut ones)")
    ap.add_argument("--full-depth", action="store_true", help="each shape at its real depth (adds mpnet-base)")
    ap.add_argument("--layers", type=int, help="every shape at this depth instead")
    ap.add_argument("--only", help="comma-separated base names: xlmr-base, modernbert-base, qwen3-0.6b, "
                    "embeddinggemma, mpnet-base (with --full-depth or --layers)")
    ap.add_argument("--out", default=OUT, help=f"output folder (default {OUT})")
    ap.add_argument("--mpnet-tokenizer", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"),
                    help="tokenizer folder for mpnet-base (its vocabulary must fit 30527 ids)")
    ap.add_argument("--stsb", default=os.path.join(ROOT, "..", "shared", "datasets", "stsb", "test.tsv"),
                    help="STS-B test, whose first 500 pairs become OUT/stsb-500.tsv (skipped when absent)")
    a = ap.parse_args()
    torch.manual_seed(0)
    fx = os.path.join(ROOT, "tests", "fixtures")
    tok_dir = {t: os.path.join(fx, t, "model") for t in ("xlmr-tiny", "modernbert-tiny", "qwen3-tiny", "gemma3-tiny")}
    tok_dir["mpnet"] = a.mpnet_tokenizer
    depth = None
    if a.full_depth or a.layers:
        depth = {k: a.layers or v for k, v in FULL.items()}
        if a.only:
            keep = a.only.split(",")
            bad = [k for k in keep if k not in FULL]
            if bad:
                ap.error(f"--only: unknown {bad}; known: {', '.join(FULL)}")
            depth = {k: v for k, v in depth.items() if k in keep}
            depth.update({k: 1 for k in CUT if k not in depth})  # keys the table needs; not written
        else:
            keep = list(FULL)
    elif a.only:
        ap.error("--only goes with --full-depth or --layers")
    vocab = {t: (len(AutoTokenizer.from_pretrained(d)) if t != "mpnet" else 0) for t, d in tok_dir.items()}
    table = shapes(vocab, depth)
    if depth is None:
        names = a.names or list(table)
    else:
        names = a.names or [n for n in table if n.rsplit("-l", 1)[0] in keep]
    os.makedirs(a.out, exist_ok=True)
    for name in names:
        tiny, pooling, cls, cfg = table[name]
        hf = os.path.join(a.out, name + "-hf")
        cls(cfg).save_pretrained(hf)
        AutoTokenizer.from_pretrained(tok_dir[tiny]).save_pretrained(hf)
        word = models.Transformer(hf, max_seq_length=128)
        st = SentenceTransformer(modules=[word, models.Pooling(cfg.hidden_size, pooling),
                                          models.Normalize()], device="cpu")
        st.save(os.path.join(a.out, name))
        shutil.rmtree(hf)
        print(name, "written", flush=True)
    if os.path.exists(a.stsb):
        rows = open(a.stsb).read().splitlines()
        with open(os.path.join(a.out, "stsb-500.tsv"), "w") as f:
            f.write("\n".join(rows[:501]) + "\n")


if __name__ == "__main__":
    main()
