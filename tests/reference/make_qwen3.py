"""A tiny Qwen3 (the Qwen3-Embedding architecture), initialised at random by `transformers`
itself, and its reference outputs for Nest's parity test (issue 22). Run once from the
repository root; outputs are committed.

Needs: torch, transformers, tokenizers, sentence-transformers, safetensors, numpy.
    python tests/reference/make_qwen3.py

Writes tests/fixtures/qwen3-tiny/:
  - model/: a sentence-transformers folder as Qwen3-Embedding's: config.json (model_type qwen3,
    4 layers, hidden 32, 4 query heads and 2 key/value heads of head_dim 16, SwiGLU 64, RMSNorm,
    rope_theta 1e6), model.safetensors from `Qwen3Model(config)` after torch.manual_seed(0), its weight matrices (not the embeddings) redrawn from N(0, 1/fan_in), with
    every RMSNorm weight perturbed by N(0, 0.2) (they start at 1); a byte-level BPE tokenizer
    trained by `tokenizers` on the parity sentences whose template appends `<|endoftext|>` (as
    Qwen3-Embedding's does), padding on the left; last-token pooling, Normalize; prompts
    {"query": "Instruct: Given a question, find its answer\\nQuery: ", "document": ""}.
  - reference.safetensors: `embeddings` = SentenceTransformer(model).encode(sentences,
    batch_size=8) (left-padded batches, as the tokenizer asks); `prompt_query` = the same with
    prompt_name="query"; `layer_<l>` for l in 1..=4: the last real token of
    `model.norm(hidden_states[l])` (for l = 4 transformers' last hidden state, already normed),
    un-normalised: Nest applies the final RMSNorm at every exit; `token_lengths`.
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.numpy import save_file
from sentence_transformers import SentenceTransformer, models
from tokenizers import Tokenizer, decoders, pre_tokenizers
from tokenizers.models import BPE
from tokenizers.processors import TemplateProcessing
from tokenizers.trainers import BpeTrainer
from transformers import Qwen2TokenizerFast, Qwen3Config, Qwen3Model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "qwen3-tiny")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_parity import SENTENCES  # noqa: E402

EOS = "<|endoftext|>"
PROMPTS = {"query": "Instruct: Given a question, find its answer\nQuery: ", "document": ""}


def tokenizer(path):
    t = Tokenizer(BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(vocab_size=400, special_tokens=[EOS], show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(SENTENCES * 4 + list(PROMPTS.values()), trainer)
    t.post_processor = TemplateProcessing(single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}",
                                          special_tokens=[(EOS, t.token_to_id(EOS))])
    fast = Qwen2TokenizerFast(tokenizer_object=t, eos_token=EOS, pad_token=EOS, unk_token=None,
                              bos_token=None, padding_side="left", model_max_length=64)
    fast.save_pretrained(path)
    return fast


def main():
    torch.manual_seed(0)
    hf = os.path.join(OUT, "hf")
    os.makedirs(hf, exist_ok=True)
    tok = tokenizer(hf)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=16, max_position_embeddings=128, rms_norm_eps=1e-6,
                      rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
                      tie_word_embeddings=False, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id)
    model = Qwen3Model(cfg)
    with torch.no_grad():  # matrices at N(0, 1/fan_in): attention far from uniform, so that
        for name, p in model.named_parameters():  # masks, windows and positions all matter
            if p.dim() == 2 and "embed" not in name:
                p.normal_(0.0, p.shape[1] ** -0.5)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.2)
    model.save_pretrained(hf)
    word = models.Transformer(hf, max_seq_length=64)
    st = SentenceTransformer(modules=[word, models.Pooling(32, "lasttoken"), models.Normalize()],
                             device="cpu", prompts=PROMPTS)
    st.save(os.path.join(OUT, "model"))
    st = SentenceTransformer(os.path.join(OUT, "model"), device="cpu")
    st.eval()
    assert st.tokenizer.padding_side == "left"
    emb = st.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
    tensors = {"embeddings": emb.astype(np.float32),
               "prompt_query": st.encode(SENTENCES, batch_size=8, prompt_name="query")}
    layers = {l: [] for l in range(1, 5)}
    lengths = []
    m = st[0].auto_model
    for i in range(0, len(SENTENCES), 8):
        feats = st.tokenize(SENTENCES[i:i + 8])
        with torch.no_grad():
            out = m(input_ids=feats["input_ids"], attention_mask=feats["attention_mask"],
                    output_hidden_states=True)
            for l in layers:
                h = out.hidden_states[l]
                if l < 4:
                    h = m.norm(h)
                layers[l].append(h[:, -1].numpy())  # left padding: the last position is real
        lengths += feats["attention_mask"].sum(1).tolist()
    for l, parts in layers.items():
        tensors[f"layer_{l}"] = np.concatenate(parts).astype(np.float32)
    tensors["token_lengths"] = np.array(lengths, dtype=np.int64)
    save_file(tensors, os.path.join(OUT, "reference.safetensors"))
    shutil.rmtree(hf)
    print("qwen3-tiny", emb.shape, "token lengths", lengths)


if __name__ == "__main__":
    main()
