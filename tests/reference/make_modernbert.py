"""A tiny ModernBERT, initialised at random by `transformers` itself, and its reference outputs
for Nest's parity test (issue 22). Run once from the repository root; outputs are committed.

Needs: torch, transformers, tokenizers, sentence-transformers, safetensors, numpy.
    python tests/reference/make_modernbert.py

Writes tests/fixtures/modernbert-tiny/:
  - model/: a sentence-transformers folder as gte-modernbert's / modernbert-embed's:
    config.json (model_type modernbert, 4 layers, hidden 32, 4 heads, GeGLU 48, pre-norm
    LayerNorms without bias, rotary with global theta 160000 / local theta 10000, local attention
    window 8 so that the sliding layers matter on the parity sentences, a global layer every 3),
    model.safetensors from `ModernBertModel(config)` after torch.manual_seed(0), its weight matrices (not the embeddings) redrawn from N(0, 1/fan_in), with every
    LayerNorm weight perturbed by N(0, 0.2); a byte-level BPE tokenizer trained by `tokenizers`
    on the parity sentences with template `[CLS] $A [SEP]`; mean pooling, Normalize.
  - reference.safetensors: `embeddings` = SentenceTransformer(model).encode(sentences,
    batch_size=8); `layer_<l>` for l in 1..=4: mask-weighted mean of `model.final_norm(
    hidden_states[l])` (for l = 4 transformers' last hidden state, already normed), un-normalised
    (Nest applies the final norm at every exit); `token_lengths`.
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
from transformers import ModernBertConfig, ModernBertModel, PreTrainedTokenizerFast

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "modernbert-tiny")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_parity import SENTENCES  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tokenizer(path):
    t = Tokenizer(BPE(unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(SENTENCES * 4, trainer)
    t.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[(s, t.token_to_id(s)) for s in ("[CLS]", "[SEP]")])
    fast = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=64)
    fast.save_pretrained(path)
    return fast


def main():
    torch.manual_seed(0)
    hf = os.path.join(OUT, "hf")
    os.makedirs(hf, exist_ok=True)
    tok = tokenizer(hf)
    cfg = ModernBertConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48,
                           num_hidden_layers=4, num_attention_heads=4,
                           max_position_embeddings=128, local_attention=8,
                           global_attn_every_n_layers=3, pad_token_id=tok.pad_token_id,
                           cls_token_id=tok.cls_token_id, sep_token_id=tok.sep_token_id,
                           bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
    model = ModernBertModel(cfg)
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
    st = SentenceTransformer(modules=[word, models.Pooling(32, "mean"), models.Normalize()],
                             device="cpu")
    st.save(os.path.join(OUT, "model"))
    st = SentenceTransformer(os.path.join(OUT, "model"), device="cpu")
    st.eval()
    emb = st.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
    tensors = {"embeddings": emb.astype(np.float32)}
    layers = {l: [] for l in range(1, 5)}
    lengths = []
    m = st[0].auto_model
    for i in range(0, len(SENTENCES), 8):
        feats = st.tokenize(SENTENCES[i:i + 8])
        with torch.no_grad():
            out = m(input_ids=feats["input_ids"], attention_mask=feats["attention_mask"],
                    output_hidden_states=True)
            assert torch.allclose(out.hidden_states[4], out.last_hidden_state)
            mask = feats["attention_mask"].unsqueeze(-1).float()
            for l in layers:
                h = out.hidden_states[l]
                if l < 4:
                    h = m.final_norm(h)
                layers[l].append(((h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).numpy())
        lengths += feats["attention_mask"].sum(1).tolist()
    for l, parts in layers.items():
        tensors[f"layer_{l}"] = np.concatenate(parts).astype(np.float32)
    tensors["token_lengths"] = np.array(lengths, dtype=np.int64)
    save_file(tensors, os.path.join(OUT, "reference.safetensors"))
    shutil.rmtree(hf)
    print("modernbert-tiny", emb.shape, "token lengths", lengths)


if __name__ == "__main__":
    main()
