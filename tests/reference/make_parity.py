"""Reference vectors for Nest's encoder parity tests (run once; outputs are committed).

Needs: torch, sentence-transformers, transformers, safetensors, numpy.
    python tests/reference/make_parity.py  # from the repository root, after scripts/setup.sh models

Writes tests/fixtures/parity/sentences.json and, per model, tests/fixtures/parity/<name>.safetensors:
  - `embeddings` [n, hidden]: SentenceTransformer(model).encode(sentences), float32
  - `layer_<l>` [n, hidden]: mean-pooled (attention-mask weighted) transformers hidden states
    with output_hidden_states=True, for l in {1, 3, last}, un-normalised
Inputs are tokenised by sentence-transformers itself (its max_seq_length truncation).
"""
import json
import os

import numpy as np
import torch
from safetensors.numpy import save_file
from sentence_transformers import SentenceTransformer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "parity")

LONG = (
    "The committee reviewed the proposal in detail, weighing the costs of the new railway line "
    "against the expected gains in travel time, regional employment and reduced road traffic. "
)
SENTENCES = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "Hi",
    "?",
    "The quick brown fox jumps over the lazy dog.",
    "Can't stop, won't stop -- it's 3:45 p.m. (really!)",
    "\"Quoted\" text with 'single quotes' and back`ticks`.",
    "Numbers: 3.14159, 2,718, 1e-9 and 42%.",
    "Café crème, naïve façade, jalapeño — déjà vu.",
    "東京は日本の首都です。",
    "Москва — столица России.",
    "Emoji test 🙂🚀 with text around it.",
    "ALL CAPS SENTENCE SHOULD BE LOWER-CASED BY THE TOKENIZER",
    "   leading and trailing spaces   ",
    "tabs\tand\tother whitespace",
    "A very short one.",
    "Two sentences here. And a second one!",
    "https://example.com/path?query=1&x=y is a URL",
    "email me at someone@example.org",
    "The cat sat on the mat.",
    "The dog sat on the log.",
    "Scientists discovered a new species of frog in the rainforest.",
    "Stock markets fell sharply after the announcement.",
    "unbelievably antidisestablishmentarianism supercalifragilisticexpialidocious",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    # past 128 tokens (the shipped tokenizer.json's fixed truncation)
    LONG * 5,
    # past 256 (MiniLM's max_seq_length)
    LONG * 10,
    # past 384 (MPNet's max_seq_length)
    LONG * 16,
    "Mixed: 数学 and math, ñ and n, ß and ss.",
    "End.",
]

MODELS = {
    "all-MiniLM-L6-v2": [1, 3, 6],
    "all-mpnet-base-v2": [1, 3, 12],
}


def main():
    torch.manual_seed(0)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "sentences.json"), "w", encoding="utf-8") as f:
        json.dump(SENTENCES, f, ensure_ascii=False, indent=1)
    for name, layers in MODELS.items():
        path = os.path.join(ROOT, "models", name)
        st = SentenceTransformer(path, device="cpu")
        st.eval()
        emb = st.encode(SENTENCES, batch_size=8, convert_to_numpy=True)
        tensors = {"embeddings": emb.astype(np.float32)}
        feats = st.tokenize(SENTENCES)
        with torch.no_grad():
            out = st[0].auto_model(
                input_ids=feats["input_ids"],
                attention_mask=feats["attention_mask"],
                output_hidden_states=True,
            )
        mask = feats["attention_mask"].unsqueeze(-1).float()
        for l in layers:
            h = out.hidden_states[l]
            pooled = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            tensors[f"layer_{l}"] = pooled.numpy().astype(np.float32)
        lengths = feats["attention_mask"].sum(1).numpy().astype(np.int64)
        tensors["token_lengths"] = lengths
        save_file(tensors, os.path.join(OUT, f"{name}.safetensors"))
        print(name, emb.shape, "token lengths", lengths.tolist())


if __name__ == "__main__":
    main()
