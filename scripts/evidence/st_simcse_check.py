"""The peer's view of one fidelity run: MRL over unsupervised SimCSE in sentence-transformers, on
the settings of recipes/mrl-simcse.toml as scripts/evidence/evidence_fidelity.sh runs it (issue 35).

    /work/venv/bin/python scripts/evidence/st_simcse_check.py --model models/mlm-small --steps 250 --seed 1 \
        --out runs/st-simcse/mlm-seed1
    nest eval sts --model runs/st-simcse/mlm-seed1 --data ../shared/datasets/stsb/dev.tsv --layers 6 \
        --dims 16,32,64,128,256,384 --dtype float32 --latency-texts 0

MatryoshkaLoss(MultipleNegativesRankingLoss(scale 20)) on (text, text) pairs of
runs/structure/train.tsv (SimCSE: the two dropout views are the positives, the batch the
negatives), dims 16..384 weight 1, AdamW 2e-5, weight decay 0.01, cosine schedule without warm-up,
grad-norm clip 1.0, batch 32, max length 256, the model's own pooling. What differs from Nest:
batches are drawn at random (Nest groups lengths), and the optimizer's weight-decay groups follow
the Hugging Face trainer. A large gap between the two says the loss, not the backbone, moves the
score.
"""
import argparse
import csv
import os

import torch
from datasets import Dataset
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.losses import MatryoshkaLoss, MultipleNegativesRankingLoss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", default="runs/structure/train.tsv")
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.data, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    texts = [r[0] for r in rows]
    ds = Dataset.from_dict({"anchor": texts, "positive": texts})
    model = SentenceTransformer(a.model, device="cpu")
    model.max_seq_length = 256
    dims = [d for d in [384, 256, 128, 64, 32, 16] if d <= model.get_sentence_embedding_dimension()]
    loss = MatryoshkaLoss(model, MultipleNegativesRankingLoss(model, scale=20.0), matryoshka_dims=dims)
    args = SentenceTransformerTrainingArguments(
        output_dir=a.out + ".trainer", max_steps=a.steps, per_device_train_batch_size=32, learning_rate=2e-5,
        weight_decay=0.01, lr_scheduler_type="cosine", warmup_ratio=0.0, max_grad_norm=1.0, seed=a.seed,
        logging_steps=25, save_strategy="no", report_to=[], dataloader_drop_last=True, use_cpu=True,
    )
    SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=loss).train()
    model.save(a.out)
    print(f"wrote {a.out} ({a.steps} steps, seed {a.seed}, torch threads {torch.get_num_threads()})")


if __name__ == "__main__":
    main()
