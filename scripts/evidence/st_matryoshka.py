"""sentence-transformers' MatryoshkaLoss on the same data and hyper-parameters as Nest's recipes.

    python scripts/evidence/st_matryoshka.py stsb   # CoSENT on STS-B train      -> runs/st-mrl-stsb/final
    python scripts/evidence/st_matryoshka.py snli   # MNRL + hard negatives on SNLI triplets -> runs/st-mrl-snli/final
    python scripts/evidence/st_matryoshka.py stsb --epochs 4 --lr 5e-5 --name st-mrl-stsb-4ep
    python scripts/evidence/st_matryoshka.py stsb --loss 2d --epochs 4 --lr 5e-5 --name st-2d-stsb   # Matryoshka2dLoss
    python scripts/evidence/st_matryoshka.py snli --loss 2d --epochs 1 --lr 5e-5 --skip-embedding-layer 1 --name x   # prior layers from 1..N-1
    python scripts/evidence/st_matryoshka.py stsb --loss 2d --epochs 4 --lr 5e-5 --layer-weighting uniform --seed 7 --name y

Needs `pip install torch==2.13.0 sentence-transformers datasets accelerate`.
Same settings as recipes/mrl-stsb.toml and recipes/mrl-snli.toml: all-MiniLM-L6-v2, dims
16..384 (weights 1), 1 epoch, batch 32, lr 2e-5, weight decay 0.01 (not on bias/LayerNorm),
10% linear warm-up then linear decay, grad-norm clip 1.0, seed 42, scale 20; MNRL batches
without duplicate texts. Evaluate the result with `nest eval --tasks sts --model runs/st-mrl-.../final`.
"""
import csv
import os
import sys
import time

from datasets import Dataset
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.losses import CoSENTLoss, Matryoshka2dLoss, MatryoshkaLoss, MultipleNegativesRankingLoss
from sentence_transformers.training_args import BatchSamplers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "..", "shared", "datasets")
DIMS = [384, 256, 128, 64, 32, 16]


def tsv(path):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return rows[0], rows[1:]


def main():
    which = sys.argv[1]
    # optional overrides: --epochs N --lr X --name NAME
    opts = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    epochs = int(opts.get("--epochs", 1))
    lr = float(opts.get("--lr", 2e-5))
    seed = int(opts.get("--seed", 42))
    weighting = opts.get("--layer-weighting", "inverse")
    if weighting not in ("inverse", "uniform"):
        raise SystemExit(f"--layer-weighting: expected inverse or uniform, got {weighting!r}")
    model = SentenceTransformer(os.path.join(ROOT, "models", "all-MiniLM-L6-v2"), device="cpu")
    if which == "stsb":
        _, rows = tsv(os.path.join(DATA, "stsb", "train.tsv"))
        ds = Dataset.from_dict({"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows], "score": [float(r[2]) for r in rows]})
        inner = CoSENTLoss(model, scale=20.0)
        sampler = BatchSamplers.BATCH_SAMPLER
    elif which == "snli":
        _, rows = tsv(os.path.join(DATA, "snli", "triplets_dev.tsv"))
        ds = Dataset.from_dict({"anchor": [r[0] for r in rows], "positive": [r[1] for r in rows], "negative": [r[2] for r in rows]})
        inner = MultipleNegativesRankingLoss(model, scale=20.0)
        sampler = BatchSamplers.NO_DUPLICATES
    else:
        raise SystemExit("usage: st_matryoshka.py stsb|snli")
    if opts.get("--skip-embedding-layer") == "1":
        # experiment: make AdaptiveLayerLoss sample prior layers from 1..N-1 only (as Nest does),
        # not from range(N-1) over all_layer_embeddings, whose entry 0 is the embedding output
        import random as _random
        import types
        from sentence_transformers.sentence_transformer.losses import adaptive_layer
        adaptive_layer.random = types.SimpleNamespace(sample=lambda pop, k: _random.sample([i for i in pop if i > 0], k))
    if opts.get("--loss", "mrl") == "2d":
        # 2DMSE as sentence-transformers has it, with every dim each step (n_dims_per_step=-1,
        # as Nest's 2DMSE recipes): one sampled shallow layer, KL at T=0.3 on the full output
        # embedding with the last layer detached (version 6). Version 6 samples the layer index
        # i from range(N) over hidden_states[i], whose entry 0 is the embedding output; the
        # weighting below gives layer l the weight 1/l that Nest's default (1/(1+i) over layers
        # 1..N-1, sentence-transformers <= 5) gives it, and the embedding output weight 0;
        # `--layer-weighting uniform` gives every layer weight 1 (Nest's `layer_weighting =
        # "uniform"`), the embedding output still 0.
        if weighting == "uniform":
            weigh = lambda i: 0.0 if i == 0 else 1.0
        else:
            weigh = lambda i: 0.0 if i == 0 else 1.0 / i
        loss = Matryoshka2dLoss(model, inner, DIMS, n_layers_per_step=1, n_dims_per_step=-1, kl_temperature=0.3,
                                layer_weighting=weigh)
    else:
        loss = MatryoshkaLoss(model, inner, matryoshka_dims=DIMS)
    out = os.path.join(ROOT, "runs", opts.get("--name", f"st-mrl-{which}"))
    args = SentenceTransformerTrainingArguments(
        output_dir=out, num_train_epochs=epochs, per_device_train_batch_size=32, learning_rate=lr,
        warmup_ratio=0.1, weight_decay=0.01, lr_scheduler_type="linear", max_grad_norm=1.0, seed=seed,
        batch_sampler=sampler, save_strategy="no", report_to=[], logging_steps=20, use_cpu=True,
        dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=loss)
    t = time.perf_counter()
    trainer.train()
    print(f"trained in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    model.save(os.path.join(out, "final"))


if __name__ == "__main__":
    main()
