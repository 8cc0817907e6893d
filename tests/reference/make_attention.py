"""Reference [CLS]-row attention probabilities for Nest's encoder (run once; output committed).

    python tests/reference/make_attention.py   # from the repository root, after scripts/setup.sh models

transformers' BertModel on models/all-MiniLM-L6-v2 with attn_implementation="eager" and
output_attentions=True, eval mode (no dropout), on a padded batch of 6 sentences of different
lengths. Writes tests/fixtures/parity/attention-all-MiniLM-L6-v2.safetensors:
  - `ids`, `mask` [6, S] int64: the padded batch (transformers' own tokenizer)
  - `layer_<l>` [6, heads, S] float32: attentions[l-1][:, :, 0, :] for l = 1..6 (the [CLS] query row)
"""
import os

import torch
from safetensors.torch import save_file
from transformers import AutoModel, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
OUT = os.path.join(ROOT, "tests", "fixtures", "parity", "attention-all-MiniLM-L6-v2.safetensors")

SENTENCES = [
    "A man is playing a guitar.",
    "Hi",
    "The committee reviewed the proposal in detail, weighing the costs of the new railway line.",
    "Café crème, naïve façade — déjà vu.",
    "Stock markets fell sharply after the announcement.",
    "?",
]


def main():
    tok = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModel.from_pretrained(MODEL, attn_implementation="eager").eval()
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_attentions=True)
    tensors = {"ids": batch["input_ids"].long().contiguous(), "mask": batch["attention_mask"].long().contiguous()}
    for l, a in enumerate(out.attentions, start=1):
        tensors[f"layer_{l}"] = a[:, :, 0, :].float().contiguous()
    save_file(tensors, OUT)
    print("wrote", OUT, {k: tuple(v.shape) for k, v in tensors.items()})


if __name__ == "__main__":
    main()
