"""A tiny Gemma 3 text model as EmbeddingGemma uses it (bidirectional attention), initialised at
random by `transformers` itself, and its reference outputs for Nest's parity test (issue 22).
Run once from the repository root; outputs are committed.

Needs: torch, transformers, tokenizers, sentence-transformers, safetensors, numpy.
    python tests/reference/make_gemma3.py

Writes tests/fixtures/gemma3-tiny/:
  - model/: a sentence-transformers folder: config.json (model_type gemma3_text, 4 layers,
    hidden 32, 4 query heads and 2 key/value heads of head_dim 16, query_pre_attn_scalar 24,
    layers sliding / full / sliding / full, sliding_window 8 as given (transformers stores 5 and
    applies `// 2 + 1` again when loading: 3), use_bidirectional_attention), model.safetensors
    from `Gemma3TextModel(config)` after torch.manual_seed(0), its weight matrices (not the
    embeddings) redrawn from N(0, 1/fan_in) and every RMSNorm weight from N(0, 0.2) (they start
    at 0 and scale by 1 + w); a byte-level BPE tokenizer trained by `tokenizers` on the parity
    sentences with template `<bos> $A <eos>`; mean pooling, Normalize (EmbeddingGemma's two Dense
    modules are not part of this model).
  - reference.safetensors: `embeddings` = SentenceTransformer(model).encode(sentences,
    batch_size=8); `layer_<l>` for l in 1..=4: mask-weighted mean of `model.norm(
    hidden_states[l])` (for l = 4 transformers' last hidden state, already normed),
    un-normalised; `token_lengths`.
"""
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
from transformers import Gemma3TextConfig, Gemma3TextModel, PreTrainedTokenizerFast

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "gemma3-tiny")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_parity import SENTENCES  # noqa: E402

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>"]


def tokenizer(path):
    t = Tokenizer(BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(SENTENCES * 4, trainer)
    t.post_processor = TemplateProcessing(
        single="<bos> $A <eos>", pair="<bos> $A <eos> $B <eos>",
        special_tokens=[(s, t.token_to_id(s)) for s in ("<bos>", "<eos>")])
    fast = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="<unk>", pad_token="<pad>",
                                   bos_token="<bos>", eos_token="<eos>", model_max_length=64)
    fast.save_pretrained(path)
    return fast


def main():
    torch.manual_seed(0)
    hf = os.path.join(OUT, "hf")
    os.makedirs(hf, exist_ok=True)
    tok = tokenizer(hf)
    cfg = Gemma3TextConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=24,
        max_position_embeddings=128, sliding_window=8, use_bidirectional_attention=True,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = Gemma3TextModel(cfg)
    with torch.no_grad():  # matrices at N(0, 1/fan_in): attention far from uniform, so that
        for name, p in model.named_parameters():  # masks, windows and positions all matter
            if p.dim() == 2 and "embed" not in name:
                p.normal_(0.0, p.shape[1] ** -0.5)
            elif "norm" in name:
                p.normal_(0.0, 0.2)
    model.save_pretrained(hf)
    word = models.Transformer(hf, max_seq_length=64)
    st = SentenceTransformer(modules=[word, models.Pooling(32, "mean"), models.Normalize()],
                             device="cpu")
    st.save(os.path.join(OUT, "model"))
    st = SentenceTransformer(os.path.join(OUT, "model"), device="cpu")
    st.eval()
    m = st[0].auto_model
    print("sliding window after reload", m.config.sliding_window)
    emb = st.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
    tensors = {"embeddings": emb.astype(np.float32)}
    layers = {l: [] for l in range(1, 5)}
    lengths = []
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
                    h = m.norm(h)
                layers[l].append(((h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).numpy())
        lengths += feats["attention_mask"].sum(1).tolist()
    for l, parts in layers.items():
        tensors[f"layer_{l}"] = np.concatenate(parts).astype(np.float32)
    tensors["token_lengths"] = np.array(lengths, dtype=np.int64)
    save_file(tensors, os.path.join(OUT, "reference.safetensors"))
    shutil.rmtree(hf)
    print("gemma3-tiny", emb.shape, "token lengths", lengths)


if __name__ == "__main__":
    main()
