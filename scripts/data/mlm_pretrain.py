#!/usr/bin/env python3
"""A paper-like backbone for issue 35: a small BERT pre-trained from scratch with masked-language
modelling (MLM) only, on the text of ../shared/datasets, for a fixed wall-clock budget on a GPU.

The papers (MIPIC, MIC, 2DMSE) start from MLM-only TinyBERT / BERT, whose [CLS] vector was never
trained as a sentence vector. None can be downloaded here, so this script makes the closest honest
stand-in: all-MiniLM-L6-v2's shape and tokenizer (6 layers x 384, 12 heads, bert-base-uncased
WordPiece), random initialisation (seed 35), MLM only (15% of tokens; 80% [MASK], 10% random,
10% kept), no next-sentence task, read through [CLS] pooling by sentence-transformers and Nest.

Corpus (never a dev or test split): every `train.tsv` text column of ../shared/datasets and the
SciFact corpus documents (title + abstract, cut into 126-token windows; SciFact is not among the
tasks this backbone is evaluated on). Held out: the text of every `dev.tsv`, scored with a fixed
mask (seed 7) at the start and the end; the held-out MLM loss is the number to read.

    python3 scripts/data/mlm_pretrain.py --seconds 170 --out models/mlm-small       # a GPU
    python3 scripts/data/mlm_pretrain.py --seconds 20 --out /tmp/mlm --tiny        # here: the CPU check

Writes OUT/ as a sentence-transformers folder ([CLS] pooling, normalised, max length 256) with
model.safetensors (BertModel keys), mlm_log.jsonl (step, tokens seen, loss, lr) and MLM.md (what
the model is, its budget, tokens seen, losses). The step count is fixed after 30 timed steps
(steps = seconds / time per step) so the learning-rate schedule ends with the budget.
"""
import argparse
import glob
import json
import math
import os
import random
import shutil
import sys
import time

import torch
from tokenizers import Tokenizer
from transformers import BertConfig, BertForMaskedLM

ST_FILES = ["1_Pooling", "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"]
TOK_FILES = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]


def tsv_texts(path):
    """The text cells of a TSV with a header (cells that parse as numbers and label columns skipped)."""
    out = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        keep = [i for i, h in enumerate(header) if h not in ("label", "score", "id", "qid", "docid")]
        for line in f:
            cells = line.rstrip("\n").split("\t")
            for i in keep:
                if i < len(cells) and cells[i].strip():
                    try:
                        float(cells[i])
                    except ValueError:
                        out.append(cells[i])
    return out


def corpus(root):
    train, dev = [], []
    for p in sorted(glob.glob(os.path.join(root, "*", "train.tsv"))):
        train += tsv_texts(p)
    for p in sorted(glob.glob(os.path.join(root, "*", "dev.tsv"))):
        dev += tsv_texts(p)
    docs = []
    sf = os.path.join(root, "scifact", "corpus.jsonl")
    if os.path.exists(sf):
        with open(sf, encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                docs.append((d.get("title", "") + ". " + d.get("text", "")).strip())
    train = list(dict.fromkeys(train))
    seen = set(train)
    dev = [t for t in dict.fromkeys(dev) if t not in seen]
    return train, docs, dev


def examples(tok, texts, docs, window=126):
    """[CLS] ids [SEP] per text (truncated at `window`), documents cut into windows."""
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    out = []
    for e in tok.encode_batch(texts, add_special_tokens=False):
        out.append([cls] + e.ids[:window] + [sep])
    for e in tok.encode_batch(docs, add_special_tokens=False):
        ids = e.ids
        for s in range(0, len(ids), window):
            if len(ids[s : s + window]) >= 8:
                out.append([cls] + ids[s : s + window] + [sep])
    return out


def batches(exs, tokens_per_batch, rng):
    """Length-bucketed batches of at most `tokens_per_batch` padded tokens, in a shuffled order."""
    order = sorted(range(len(exs)), key=lambda i: (len(exs[i]), rng.random()))
    out, cur, width = [], [], 0
    for i in order:
        w = max(width, len(exs[i]))
        if cur and w * (len(cur) + 1) > tokens_per_batch:
            out.append(cur)
            cur, w = [], len(exs[i])
        cur.append(i)
        width = w
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def collate(exs, idx, mask_id, vocab, special, gen, device):
    """Padded ids, attention mask and MLM labels (15%; 80/10/10), masks drawn from `gen`."""
    width = max(len(exs[i]) for i in idx)
    ids = torch.zeros(len(idx), width, dtype=torch.long)
    att = torch.zeros(len(idx), width, dtype=torch.long)
    for r, i in enumerate(idx):
        ids[r, : len(exs[i])] = torch.tensor(exs[i])
        att[r, : len(exs[i])] = 1
    labels = ids.clone()
    can = att.bool() & ~torch.isin(ids, special)
    pick = (torch.rand(ids.shape, generator=gen) < 0.15) & can
    labels[~pick] = -100
    u = torch.rand(ids.shape, generator=gen)
    ids = torch.where(pick & (u < 0.8), torch.full_like(ids, mask_id), ids)
    rnd = torch.randint(vocab, ids.shape, generator=gen)
    ids = torch.where(pick & (u >= 0.8) & (u < 0.9), rnd, ids)
    return ids.to(device, non_blocking=True), att.to(device, non_blocking=True), labels.to(device, non_blocking=True), int(att.sum())


def masked_logits(model, ids, att, labels):
    """The MLM head's logits at the masked positions only (the head over every position is the
    largest product of a small model's step) and their labels."""
    hidden = model.bert(input_ids=ids, attention_mask=att).last_hidden_state
    m = labels != -100
    return model.cls(hidden[m]), labels[m]


@torch.no_grad()
def held_out(model, dev, args, tok, special, device, dtype):
    model.eval()
    gen = torch.Generator().manual_seed(7)
    tot, n, hit = 0.0, 0, 0
    for idx in batches(dev, args.tokens_per_batch, random.Random(7)):
        ids, att, labels, _ = collate(dev, idx, tok.token_to_id("[MASK]"), tok.get_vocab_size(), special, gen, device)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            logits, y = masked_logits(model, ids, att, labels)
        tot += torch.nn.functional.cross_entropy(logits.float(), y, reduction="sum").item()
        hit += (logits.argmax(-1) == y).sum().item()
        n += y.numel()
    model.train()
    return tot / max(n, 1), hit / max(n, 1)


def save(model, cfg, args, tok_dir, st_dir, meta):
    os.makedirs(args.out, exist_ok=True)
    from safetensors.torch import save_file

    sd = {k[len("bert.") :]: v.detach().float().cpu().contiguous() for k, v in model.state_dict().items() if k.startswith("bert.")}
    if args.round_fp16:
        sd = {k: (v.half().float() if v.is_floating_point() else v) for k, v in sd.items()}
    tmp = os.path.join(args.out, "model.safetensors.partial")
    save_file(sd, tmp, metadata={"format": "pt"})
    os.replace(tmp, os.path.join(args.out, "model.safetensors"))
    c = cfg.to_dict()
    c["architectures"] = ["BertModel"]
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    for name in TOK_FILES:
        shutil.copy(os.path.join(tok_dir, name), args.out)
    for name in ST_FILES:
        src = os.path.join(st_dir, name)
        dst = os.path.join(args.out, name)
        if os.path.isdir(src):
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            shutil.copy(src, dst)
    with open(os.path.join(args.out, "MLM.md"), "w") as f:
        f.write(
            "A small BERT pre-trained from scratch with MLM only (scripts/data/mlm_pretrain.py), "
            "read through [CLS] pooling: a paper-like backbone for issue 35.\n\n"
        )
        for k, v in meta.items():
            f.write(f"- {k}: {v}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # scripts/
    ap.add_argument("--root", default=os.path.join(here, "..", "..", "shared", "datasets"))
    ap.add_argument("--tokenizer", default=os.path.join(here, "..", "models", "all-MiniLM-L6-v2"), help="folder with tokenizer.json and its files")
    ap.add_argument("--st-files", default=os.path.join(here, "..", "models", "minilm-cls"), help="folder with [CLS]-pooling sentence-transformers files")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=170.0, help="training wall-clock budget (the schedule is fitted to it)")
    ap.add_argument("--tokens-per-batch", type=int, default=32768)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup-steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--max-steps", type=int, default=0, help="a fixed step count instead of the timed one")
    ap.add_argument("--round-fp16", action="store_true", help="save weights rounded through float16 (so a float16 copy carried elsewhere is the same model)")
    ap.add_argument("--tiny", action="store_true", help="2 layers x 64 and --small-data, for a check on the CPU")
    ap.add_argument("--small-data", action="store_true", help="4,000 examples, 500 held out, for a check on the CPU")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = True

    tok = Tokenizer.from_file(os.path.join(args.tokenizer, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    train, docs, dev_texts = corpus(args.root)
    t0 = time.time()
    exs = examples(tok, train, docs)
    dev = examples(tok, dev_texts, [])
    ntok = sum(len(e) for e in exs)
    print(f"corpus: {len(train)} train texts + {len(docs)} SciFact documents -> {len(exs)} examples, {ntok} tokens; held out: {len(dev)} dev texts ({time.time() - t0:.1f} s)", flush=True)
    if args.tiny or args.small_data:
        exs, dev = exs[:4000], dev[:500]
    shape = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
    if args.tiny:
        shape = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
    cfg = BertConfig(vocab_size=tok.get_vocab_size(), max_position_embeddings=512, type_vocab_size=2, **shape)
    model = BertForMaskedLM(cfg).to(device)
    special = torch.tensor([tok.token_to_id(t) for t in ["[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"]])
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    nodecay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-6, fused=device.type == "cuda")
    h0 = held_out(model, dev, args, tok, special, device, dtype)
    print(f"held-out MLM loss before training: {h0[0]:.3f} (accuracy {h0[1]:.3f})", flush=True)

    rng, gen = random.Random(args.seed), torch.Generator().manual_seed(args.seed)
    mask_id, vocab = tok.token_to_id("[MASK]"), tok.get_vocab_size()
    total = args.max_steps or 10**9
    step, seen, epoch, log = 0, 0, 0, []
    start = time.time()
    timed_from = None
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "mlm_log.jsonl"), "w")
    done = False
    while not done:
        epoch += 1
        for idx in batches(exs, args.tokens_per_batch, rng):
            warm = args.warmup_steps
            lr = args.lr * min((step + 1) / warm, max(0.0, (total - step) / max(1, total - warm)))
            for g in opt.param_groups:
                g["lr"] = lr
            ids, att, labels, ntok_batch = collate(exs, idx, mask_id, vocab, special, gen, device)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
                logits, y = masked_logits(model, ids, att, labels)
            loss = torch.nn.functional.cross_entropy(logits.float(), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            seen += ntok_batch
            if step == 5:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                timed_from = time.time()
            if step == 35 and not args.max_steps:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                per = (time.time() - timed_from) / 30
                total = max(step + 1, int((args.seconds - (time.time() - start)) / per) + step)
                print(f"{per * 1000:.1f} ms per step -> {total} steps in {args.seconds:.0f} s", flush=True)
            if step % 100 == 0 or step == total:
                rec = {"step": step, "epoch": epoch, "tokens": seen, "loss": round(loss.item(), 4), "lr": lr, "s": round(time.time() - start, 1)}
                logf.write(json.dumps(rec) + "\n")
                logf.flush()
                print(rec, flush=True)
            if step >= total:
                done = True
                break
    wall = time.time() - start
    h1 = held_out(model, dev, args, tok, special, device, dtype)
    print(f"held-out MLM loss after: {h1[0]:.3f} (accuracy {h1[1]:.3f}); {step} steps, {seen} tokens seen, {wall:.0f} s", flush=True)
    dev_name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    save(model, cfg, args, args.tokenizer, args.st_files, {
        "shape": f"{cfg.num_hidden_layers} layers x {cfg.hidden_size}, {cfg.num_attention_heads} heads, FFN {cfg.intermediate_size}, vocabulary {cfg.vocab_size} (bert-base-uncased WordPiece)",
        "corpus": f"{len(train)} distinct train-split texts of ../shared/datasets + {len(docs)} SciFact documents = {len(exs)} examples, {ntok} tokens; no dev or test text",
        "training": f"{step} steps ({epoch} passes begun), {seen} tokens seen (padding excluded), batches of at most {args.tokens_per_batch} padded tokens, AdamW lr {args.lr} (betas 0.9/0.98, wd 0.01), warm-up {args.warmup_steps} steps then linear decay, {'bf16 autocast' if dtype == torch.bfloat16 else 'float32'}, seed {args.seed}, {wall:.0f} s on {dev_name} (torch {torch.__version__})",
        "last training-batch MLM loss": f"{loss.item():.3f}",
        "held-out MLM loss (dev-split text, fixed mask)": f"{h0[0]:.3f} before, {h1[0]:.3f} after (masked-token accuracy {h0[1]:.3f} -> {h1[1]:.3f})",
        "pooling": "[CLS] (the papers' reading), normalised, max length 256",
        "weights": "float32" + (", rounded through float16" if args.round_fp16 else ""),
    })
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
