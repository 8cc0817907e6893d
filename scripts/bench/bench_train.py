"""The Python side of `nest bench train`, on the same machine in the same run.

  step   plain PyTorch + transformers: one MRL(MNRL) training step on the same consecutive
         batches as Nest (anchor/positive pairs, batch B, max_length L, mean pooling, dims D),
         AdamW (fused=True; no decay on bias/LayerNorm), grad clipping; median seconds per step.
  epoch  sentence-transformers' SentenceTransformerTrainer with
         MatryoshkaLoss(MultipleNegativesRankingLoss) for one epoch over the same pairs, the same
         hyper-parameters; wall seconds of trainer.train().

Prints one JSON line: {"torch_step_s", "torch_steps", "st_epoch_s", "peak_rss_mb", "torch_threads"}.

--bf16 (optional) measures both in bfloat16 mixed precision instead: the plain-PyTorch step's forward
and loss under torch.autocast("cpu", dtype=torch.bfloat16) (float32 master weights, gradients and
AdamW state; backward outside the autocast region, as PyTorch recommends), and the
sentence-transformers trainer with bf16=True (accelerate's CPU bf16 autocast). The JSON line then
also carries "dtype": "bf16"; without the flag nothing changes.

--mini-batch-size M (optional, 0: off) runs GradCache on both sides, as Nest's recipe key does: the
PyTorch step encodes each column in chunks of M rows without autograd, scores the batch, then
re-encodes each chunk under the same RNG state and back-propagates the cached gradients (Gao et al.
2021; what sentence-transformers' CachedMultipleNegativesRankingLoss does), and the
sentence-transformers epoch uses MatryoshkaLoss(CachedMultipleNegativesRankingLoss(mini_batch_size=M)).

--objective 2dmse (optional, default mrl) times 2DMSE instead, as Nest's `[{kind = "2dmse"}]` defaults
compute it (crates/nest-train/src/objective/two_d.rs): the plain-PyTorch step runs the forward with
every layer's states, MRL(MNRL) at the last layer, the same at one shallow layer drawn uniformly from
1..N-1 weighted 1/l, and the KL alignment (T = 0.3, the last layer detached) of that layer's
normalised vectors, both columns stacked, at the full dim and averaged over the prefix dims; the
sentence-transformers epoch uses Matryoshka2dLoss(MultipleNegativesRankingLoss, n_layers_per_step=1,
n_dims_per_step=-1). Not with --mini-batch-size. The JSON line then carries "objective": "2dmse".

--device cuda (optional) runs both on the GPU (what `nest bench train` passes when Nest itself trains
on a GPU): the step synchronises the device before reading the clock, autocast is torch.autocast("cuda").
"""
import argparse
import contextlib
import csv
import json
import random
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def read_pairs(path, n):
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    return [(r[0], r[1]) for r in rows[:n]]


def mean_pool(h, mask):
    m = mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)


def mrl_mnrl(a, p, dims, scale=20.0):
    labels = torch.arange(len(a), device=a.device)
    loss = 0.0
    for d in dims:
        x = F.normalize(a[:, :d], dim=-1)
        y = F.normalize(p[:, :d], dim=-1)
        loss = loss + F.cross_entropy(x @ y.T * scale, labels)
    return loss


def kl_align(s, t, temperature=0.3):
    """Nest's losses::kl_align: batch-mean KL(softmax(t / T) || softmax(s / T)) times T."""
    log_q = F.log_softmax(s / temperature, dim=-1)
    log_p = F.log_softmax(t / temperature, dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum() * (temperature / len(s))


def two_d_mse(model, tok, batch, dims, a, layer):
    """2DMSE as Nest's defaults compute it (see the module docstring), shallow layer `layer`."""
    states = []
    for col in (0, 1):
        enc = tok([b[col] for b in batch], padding=True, truncation=True, max_length=a.max_length, return_tensors="pt").to(a.device)
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True)
        states.append([mean_pool(out.hidden_states[k], enc["attention_mask"]) for k in (layer, len(out.hidden_states) - 1)])
    shallow, last = [s[0] for s in states], [s[1] for s in states]
    loss = mrl_mnrl(last[0], last[1], dims) + mrl_mnrl(shallow[0], shallow[1], dims) / layer
    student = F.normalize(torch.cat(shallow), dim=-1)
    teacher = F.normalize(torch.cat(last), dim=-1).detach()
    full = max(dims)
    prefix = [kl_align(F.normalize(student[:, :d], dim=-1), F.normalize(teacher[:, :d], dim=-1)) for d in dims if d < full]
    loss = loss + kl_align(student, teacher)
    if prefix:
        loss = loss + torch.stack(prefix).mean()
    return loss


def encode(model, tok, texts, a):
    enc = tok(texts, padding=True, truncation=True, max_length=a.max_length, return_tensors="pt").to(a.device)
    out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
    return mean_pool(out.last_hidden_state, enc["attention_mask"])


def cached_step(model, tok, batch, dims, a, autocast):
    """GradCache: chunks without autograd, the loss on the cached vectors, then each chunk again
    under the same RNG state with its cached gradient back-propagated."""
    m = a.mini_batch_size
    cols = [[b[c] for b in batch] for c in (0, 1)]
    states, reps = [], []
    for texts in cols:
        parts = []
        for i in range(0, len(texts), m):
            states.append(torch.random.get_rng_state() if a.device == "cpu" else torch.cuda.get_rng_state())
            with torch.no_grad(), autocast():
                parts.append(encode(model, tok, texts[i:i + m], a))
        reps.append(torch.cat(parts).detach().requires_grad_(True))
    with autocast():
        loss = mrl_mnrl(reps[0], reps[1], dims)
    loss.backward()
    k = 0
    for c, texts in enumerate(cols):
        for i in range(0, len(texts), m):
            if a.device == "cpu":
                torch.random.set_rng_state(states[k])
            else:
                torch.cuda.set_rng_state(states[k])
            k += 1
            with autocast():
                v = encode(model, tok, texts[i:i + m], a)
            (v * reps[c].grad[i:i + m]).sum().backward()
    return loss


def bench_step(a):
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModel.from_pretrained(a.model).to(a.device)
    model.train()
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    # fused: the kernel sentence-transformers' trainer uses by default (optim="adamw_torch_fused"),
    # and the one Nest's AdamW calls
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=2e-5, fused=True)
    pairs = read_pairs(a.data, a.batch_size * (a.steps + a.warmup))
    dims = [int(x) for x in a.dims.split(",")]
    kind = torch.device(a.device).type
    autocast = (lambda: torch.autocast(kind, dtype=torch.bfloat16)) if a.bf16 else contextlib.nullcontext
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)
    times = []
    layers = model.config.num_hidden_layers
    draws = random.Random(42)
    for i in range(a.steps + a.warmup):
        batch = pairs[i * a.batch_size:(i + 1) * a.batch_size]
        sync()
        t = time.perf_counter()
        if a.objective == "2dmse":
            with autocast():
                loss = two_d_mse(model, tok, batch, dims, a, draws.randint(1, layers - 1))
            loss.backward()
        elif a.mini_batch_size:
            cached_step(model, tok, batch, dims, a, autocast)
        else:
            with autocast():
                emb = [encode(model, tok, [b[col] for b in batch], a) for col in (0, 1)]
                loss = mrl_mnrl(emb[0], emb[1], dims)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        sync()
        if i >= a.warmup:
            times.append(time.perf_counter() - t)
    return statistics.median(times), len(times)


def bench_epoch(a):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.losses import CachedMultipleNegativesRankingLoss, Matryoshka2dLoss, MatryoshkaLoss, MultipleNegativesRankingLoss
    from sentence_transformers.training_args import BatchSamplers

    pairs = read_pairs(a.epoch_data, 10**9)
    ds = Dataset.from_dict({"anchor": [p[0] for p in pairs], "positive": [p[1] for p in pairs]})
    model = SentenceTransformer(a.model, device=a.device)
    dims = [int(x) for x in a.dims.split(",")]
    base = CachedMultipleNegativesRankingLoss(model, mini_batch_size=a.mini_batch_size) if a.mini_batch_size else MultipleNegativesRankingLoss(model)
    if a.objective == "2dmse":
        loss = Matryoshka2dLoss(model, base, matryoshka_dims=sorted(dims, reverse=True), n_layers_per_step=1, n_dims_per_step=-1)
    else:
        loss = MatryoshkaLoss(model, base, matryoshka_dims=sorted(dims, reverse=True))
    args = SentenceTransformerTrainingArguments(
        output_dir=a.out, num_train_epochs=1, per_device_train_batch_size=a.batch_size, learning_rate=2e-5,
        warmup_ratio=0.1, weight_decay=0.01, lr_scheduler_type="linear", max_grad_norm=1.0, seed=42,
        batch_sampler=BatchSamplers.NO_DUPLICATES, save_strategy="no", report_to=[], logging_steps=10**9,
        use_cpu=a.device == "cpu", dataloader_num_workers=0, disable_tqdm=True, **({"bf16": True} if a.bf16 else {}),
    )
    model.max_seq_length = a.max_length
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds, loss=loss)
    if a.bf16:
        print(f"  sentence-transformers trainer: accelerate mixed precision '{trainer.accelerator.mixed_precision}'", file=sys.stderr)
    t = time.perf_counter()
    trainer.train()
    if torch.device(a.device).type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--epoch-data", required=True)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=32)
    ap.add_argument("--dims", default="16,32,64,128,256,384")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default="/tmp/nest-bench-st")
    ap.add_argument("--bf16", action="store_true", help="bfloat16 mixed precision (autocast) for both measures")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda")
    ap.add_argument("--mini-batch-size", type=int, default=0, help="GradCache chunk size on both sides (0: off)")
    ap.add_argument("--no-epoch", action="store_true", help="time the step only (no sentence-transformers epoch)")
    ap.add_argument("--objective", default="mrl", choices=["mrl", "2dmse"], help="what both measures train (2dmse: not with --mini-batch-size)")
    a = ap.parse_args()
    if a.objective == "2dmse" and a.mini_batch_size:
        ap.error("--objective 2dmse does not take --mini-batch-size")
    torch.manual_seed(0)
    step, n = bench_step(a)
    tag = " (bf16 autocast)" if a.bf16 else ""
    print(f"  torch step{tag}: median {step:.3f} s over {n} steps", file=sys.stderr)
    try:
        import datasets  # noqa: F401 - the trainer's input type; absent on some GPU images
    except ImportError as e:
        epoch = None
        print(f"  sentence-transformers epoch: skipped, the trainer needs `datasets` ({e})", file=sys.stderr)
    else:
        epoch = None if a.no_epoch else bench_epoch(a)
        if epoch is not None:
            print(f"  sentence-transformers epoch{' (bf16=True)' if a.bf16 else ''}: {epoch:.1f} s", file=sys.stderr)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"torch_step_s": step, "torch_steps": n, "st_epoch_s": epoch, "peak_rss_mb": rss, "torch_threads": torch.get_num_threads()}
    if a.bf16:
        result["dtype"] = "bf16"
    if a.mini_batch_size:
        result["mini_batch_size"] = a.mini_batch_size
    if a.objective != "mrl":
        result["objective"] = a.objective
    if torch.device(a.device).type == "cuda":
        result["gpu_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
        result["device"] = torch.cuda.get_device_name()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
