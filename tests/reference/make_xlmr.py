"""A tiny XLM-RoBERTa, initialised at random by `transformers` itself, and its reference outputs
for Nest's parity test (issue 22). Run once from the repository root; outputs are committed.

Needs: torch, transformers, tokenizers, sentence-transformers, safetensors, numpy.
    python tests/reference/make_xlmr.py

Writes tests/fixtures/xlmr-tiny/:
  - model/: a sentence-transformers folder (config.json with model_type xlm-roberta, 4 layers,
    hidden 32, RoBERTa's position offset with pad id 1, one token type; model.safetensors from
    `XLMRobertaModel(config)` after torch.manual_seed(0), its weight matrices (not the embeddings) redrawn from N(0, 1/fan_in),, LayerNorm weights and biases perturbed by
    N(0, 0.2); a SentencePiece-Unigram tokenizer.json
    trained by `tokenizers` on the parity sentences with XLM-R's special tokens and template
    `<s> $A </s>`; mean pooling, Normalize)
  - reference.safetensors: `embeddings` [n, 32] = SentenceTransformer(model).encode(sentences,
    batch_size=8) (padded batches: right padding, pad id 1), `layer_<l>` [n, 32] for l in 1..=4:
    attention-mask mean-pooled hidden states of the same padded batches, un-normalised;
    `token_lengths` [n]; with a prompt: `prompt_query` = encode(sentences, prompt="query: "),
    `prompt_query_excluded` = the same with the Pooling module's include_prompt = False;
    `lasttoken` [n, 32] = the last real token's state at the last layer (sentence-transformers'
    Pooling "lasttoken" mode, un-normalised), batches of 8 padded on the right.
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.numpy import save_file
from sentence_transformers import SentenceTransformer, models
from tokenizers import SentencePieceUnigramTokenizer
from tokenizers.processors import TemplateProcessing
from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "xlmr-tiny")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_parity import SENTENCES  # noqa: E402

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def tokenizer(path):
    tok = SentencePieceUnigramTokenizer()
    tok.train_from_iterator(SENTENCES * 4, vocab_size=300, special_tokens=SPECIALS,
                            unk_token="<unk>", show_progress=False)
    t = tok._tokenizer
    t.post_processor = TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[(s, t.token_to_id(s)) for s in ("<s>", "</s>")])
    fast = XLMRobertaTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                                   cls_token="<s>", sep_token="</s>", model_max_length=64)
    fast.save_pretrained(path)
    return fast


def main():
    torch.manual_seed(0)
    hf = os.path.join(OUT, "hf")
    os.makedirs(hf, exist_ok=True)
    tok = tokenizer(hf)
    assert [tok.convert_ids_to_tokens(i) for i in range(5)] == SPECIALS
    cfg = XLMRobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=4,
                           num_attention_heads=4, intermediate_size=64,
                           max_position_embeddings=66, type_vocab_size=1, pad_token_id=1,
                           bos_token_id=0, eos_token_id=2, hidden_dropout_prob=0.1,
                           attention_probs_dropout_prob=0.1)
    model = XLMRobertaModel(cfg)
    with torch.no_grad():  # matrices at N(0, 1/fan_in): attention far from uniform, so that
        for name, p in model.named_parameters():  # masks, windows and positions all matter
            if p.dim() == 2 and "embed" not in name:
                p.normal_(0.0, p.shape[1] ** -0.5)
    with torch.no_grad():  # LayerNorms start at (1, 0): perturb them so that parity covers them
        for name, p in model.named_parameters():
            if "LayerNorm" in name:
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
    for i in range(0, len(SENTENCES), 8):
        feats = st.tokenize(SENTENCES[i:i + 8])
        with torch.no_grad():
            out = st[0].auto_model(input_ids=feats["input_ids"],
                                   attention_mask=feats["attention_mask"],
                                   output_hidden_states=True)
        mask = feats["attention_mask"].unsqueeze(-1).float()
        for l in layers:
            h = out.hidden_states[l]
            layers[l].append(((h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).numpy())
        lengths += feats["attention_mask"].sum(1).tolist()
    for l, parts in layers.items():
        tensors[f"layer_{l}"] = np.concatenate(parts).astype(np.float32)
    tensors["token_lengths"] = np.array(lengths, dtype=np.int64)
    tensors["prompt_query"] = st.encode(SENTENCES, batch_size=8, prompt="query: ")
    st[1].include_prompt = False
    tensors["prompt_query_excluded"] = st.encode(SENTENCES, batch_size=8, prompt="query: ")
    st[1].include_prompt = True
    last = []
    for i in range(0, len(SENTENCES), 8):
        feats = st.tokenize(SENTENCES[i:i + 8])
        with torch.no_grad():
            h = st[0].auto_model(input_ids=feats["input_ids"],
                                 attention_mask=feats["attention_mask"]).last_hidden_state
        idx = feats["attention_mask"].sum(1) - 1
        last.append(h[torch.arange(h.shape[0]), idx].numpy())
    tensors["lasttoken"] = np.concatenate(last).astype(np.float32)
    save_file(tensors, os.path.join(OUT, "reference.safetensors"))
    with open(os.path.join(OUT, "sentences.json"), "w", encoding="utf-8") as f:
        json.dump(SENTENCES, f, ensure_ascii=False, indent=1)
    shutil.rmtree(hf)
    print("xlmr-tiny", emb.shape, "token lengths", lengths)


if __name__ == "__main__":
    main()
