"""Real-size models with random weights, for the encode-speed comparison of the new backbones
(issue 22; BENCHMARKS.md). transformers initialises each at random (seed 0) with the shape of a
real embedding model, cut to fewer layers to fit a 2-core budget; the tokenizer is the tiny one
of tests/fixtures/<arch>-tiny (vocab_size follows it: the embedding table's size does not change
the per-token cost). Writes runs/bench-models/<name>/ (sentence-transformers folders).

    python scripts/make_bench_models.py            # all four
    target/release/nest bench encode --model runs/bench-models/modernbert-base-l6 \\
        --data runs/bench-models/stsb-500.tsv --layers 6 --python /path/to/venv/bin/python

Shapes: xlm-roberta-base (multilingual-e5-base, bge-m3's smaller sibling) at 6 of 12 layers;
ModernBERT-base (gte-modernbert-base, modernbert-embed-base) at 6 of 22; Qwen3-Embedding-0.6B at
4 of 28; EmbeddingGemma-300m at 6 of 24 (its two Dense modules left out).
"""
import os
import shutil
import sys

import torch
from sentence_transformers import SentenceTransformer, models
from transformers import (AutoTokenizer, Gemma3TextConfig, Gemma3TextModel, ModernBertConfig,
                          ModernBertModel, Qwen3Config, Qwen3Model, XLMRobertaConfig,
                          XLMRobertaModel)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "runs", "bench-models")


def shapes(vocab):
    return {
        "xlmr-base-l6": ("xlmr-tiny", "mean", XLMRobertaModel, XLMRobertaConfig(
            vocab_size=vocab["xlmr-tiny"], hidden_size=768, num_hidden_layers=6,
            num_attention_heads=12, intermediate_size=3072, max_position_embeddings=514,
            type_vocab_size=1, pad_token_id=1)),
        "modernbert-base-l6": ("modernbert-tiny", "mean", ModernBertModel, ModernBertConfig(
            vocab_size=vocab["modernbert-tiny"], hidden_size=768, num_hidden_layers=6,
            num_attention_heads=12, intermediate_size=1152, max_position_embeddings=8192,
            pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3)),
        "qwen3-0.6b-l4": ("qwen3-tiny", "lasttoken", Qwen3Model, Qwen3Config(
            vocab_size=vocab["qwen3-tiny"], hidden_size=1024, num_hidden_layers=4,
            num_attention_heads=16, num_key_value_heads=8, head_dim=128, intermediate_size=3072,
            max_position_embeddings=32768, pad_token_id=0, eos_token_id=0)),
        "embeddinggemma-l6": ("gemma3-tiny", "mean", Gemma3TextModel, Gemma3TextConfig(
            vocab_size=vocab["gemma3-tiny"], hidden_size=768, num_hidden_layers=6,
            num_attention_heads=3, num_key_value_heads=1, head_dim=256, intermediate_size=1152,
            query_pre_attn_scalar=256, max_position_embeddings=2048, sliding_window=512,
            use_bidirectional_attention=True, pad_token_id=0, eos_token_id=1, bos_token_id=2)),
    }


def main():
    torch.manual_seed(0)
    fx = os.path.join(ROOT, "tests", "fixtures")
    vocab = {t: len(AutoTokenizer.from_pretrained(os.path.join(fx, t, "model")))
             for t in ("xlmr-tiny", "modernbert-tiny", "qwen3-tiny", "gemma3-tiny")}
    names = sys.argv[1:] or list(shapes(vocab))
    for name in names:
        tiny, pooling, cls, cfg = shapes(vocab)[name]
        hf = os.path.join(OUT, name + "-hf")
        cls(cfg).save_pretrained(hf)
        AutoTokenizer.from_pretrained(os.path.join(fx, tiny, "model")).save_pretrained(hf)
        word = models.Transformer(hf, max_seq_length=128)
        st = SentenceTransformer(modules=[word, models.Pooling(cfg.hidden_size, pooling),
                                          models.Normalize()], device="cpu")
        st.save(os.path.join(OUT, name))
        shutil.rmtree(hf)
        print(name, "written")
    rows = open(os.path.join(ROOT, "..", "shared", "datasets", "stsb", "test.tsv")).read().splitlines()
    with open(os.path.join(OUT, "stsb-500.tsv"), "w") as f:
        f.write("\n".join(rows[:501]) + "\n")


if __name__ == "__main__":
    main()
