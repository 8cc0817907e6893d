"""Paper-only reference for SMEC (Zhang et al., "SMEC: Rethinking Matryoshka
Representation Learning for Retrieval Embedding Compression").

Written from /work/shared/papers/SMEC.md only, float64, on small random
inputs generated here with a fixed seed and saved in the output file.
Decisions and alternative readings are listed in README.md next to this file.

Run (from the repository root):
    /work/venv/bin/python tests/reference/paper/smec_paper.py

Output: tests/fixtures/paper/smec_paper.safetensors (float64 except the two
*_idx / *_neighbors index tensors, which are int64).

Setting (my choices; the paper's are far larger): backbone / FC output dim
D = 16, dimension trajectory [16, 8, 4, 2] (D, D/2, D/4, D/8; sec. 3.2),
FC layer emb = e W^T with no bias (Appendix A: y = W x), 4 queries x 6
corpus items with graded relevance in {0,1,2}, Gumbel-softmax temperature
1.0 (eq. 6 writes softmax_tau, no value given), S-XBM memory of 12 entries,
top-k = 3 neighbours, alpha = 1.0 (eq. 9). Generator: torch.Generator
seeded with 20240611, draws in the order listed below.

Inputs (generated, saved):
  query_emb     [4,16]  frozen backbone embeddings of the queries, N(0,1)
  corpus_emb    [6,16]  frozen backbone embeddings of the corpus, N(0,1)
  relevance     [4,6]   graded labels y_ij in {0,1,2} (float64)
  w_fc          [16,16] trainable FC layer, I + 0.3 N(0,1)
  ads_logits    [16]    ADS learnable dimension logits z_hat, N(0,1)
  gumbel_noise  [16]    G = -log(-log U), U ~ Uniform(0,1) (eq. 6)
  xbm_memory    [12,16] S-XBM FIFO queue of frozen backbone features from
                        earlier batches (row 0 = oldest), N(0,1)

Rank loss (eq. 8, the supervised loss, sums, no averaging):
  L_rank(Mset) = sum_i sum_j sum_k sum_{m in Mset} I(y_ij > y_ik) (y_ij - y_ik)
                 log(1 + exp(s_ik[:m] - s_ij[:m])),
  s_ij[:m] = cos(emb_q_i[:m], emb_c_j[:m]), emb = FC(backbone embedding).
  rank_loss_per_dim            [4]      L_rank({m}) for m = 16, 8, 4, 2
  grad_rank_loss_dim{16,8,4,2}_wrt_w_fc  [16,16]
  mrl_rank_loss                []       parallel MRL (eq. 1, c_m = 1):
                                        L_rank({16,8,4,2})
  grad_mrl_rank_loss_wrt_w_fc  [16,16]
SMRL (sec. 3.2, Fig. 2c): stage s trains only the transition
D/2^(s-1) -> D/2^s, loss L_rank({D/2^(s-1), D/2^s}):
  smrl_stage_loss              [3]      stages 1,2,3 = {16,8}, {8,4}, {4,2}
  grad_smrl_stage{1,2,3}_wrt_w_fc  [16,16]  (rows >= D/2^(s-1) get 0)
ADS (sec. 3.3, eq. 6, Fig. 3), stage 1 (16 -> 8):
  ads_probs                    [16]     z = softmax((z_hat + G) / 1.0)
  ads_selected_idx             [8]      int64, top-8 of z, ascending index
                                        order (ties: lower index first)
  ads_stage1_loss_soft         []       L_rank on emb (16) + L_rank on
                                        emb[:, sel] * z[sel] (selected dims
                                        weighted by their probabilities)
  grad_ads_stage1_loss_soft_wrt_w_fc        [16,16]
  grad_ads_stage1_loss_soft_wrt_ads_logits  [16]
  ads_stage1_loss_st           []       straight-through: forward uses the
                                        hard 8-hot mask (emb[:, sel]),
                                        backward goes through z[sel]
  grad_ads_stage1_loss_st_wrt_w_fc          [16,16]
  grad_ads_stage1_loss_st_wrt_ads_logits    [16]
S-XBM (sec. 3.4, eq. 7, Fig. 4): current batch = the 10 frozen embeddings
e = [query_emb; corpus_emb]; N_K(i) = the 3 memory rows with the highest
cosine similarity to e_i (frozen features, current batch enqueued only after
the loss, so no self-matches); loss = sum_i sum_{j in N_K(i)} |A_ij - B_ij|.
  sxbm_neighbors               [10,3]   int64 memory row indices, best first
  xbm_memory_after             [12,16]  FIFO after enqueueing the batch
  sxbm_loss                    [3]      PRIMARY, d = 8,4,2:
                                        A = cos(e_i, m_j) (original frozen
                                        embedding = teacher),
                                        B = cos(FC(e_i)[:d], FC(m_j)[:d])
  grad_sxbm_d{8,4,2}_wrt_w_fc  [16,16]
  sxbm_alt_fc_full_loss        [3]      A = cos(FC(e_i), FC(m_j)) (full FC
                                        output as teacher, not detached),
                                        B as primary
  grad_sxbm_alt_fc_full_d{8,4,2}_wrt_w_fc  [16,16]
  sxbm_alt_literal_loss        [3]      eq. 7 verbatim on the stored
                                        (frozen) embeddings: A = cos(e_i,m_j),
                                        B = cos(e_i[:d], m_j[:d]); constant,
                                        no trainable input, no gradient
  sxbm_ads_soft_d8             []       primary S-XBM with the low-dim
                                        embedding = ADS soft selection
                                        FC(.)[sel] * z[sel]
  grad_sxbm_ads_soft_d8_wrt_w_fc        [16,16]
  grad_sxbm_ads_soft_d8_wrt_ads_logits  [16]
Stage-1 SMEC total (eq. 9, alpha = 1):
  smec_stage1_total            []       ads_stage1_loss_soft + sxbm_ads_soft_d8
  grad_smec_stage1_total_wrt_w_fc        [16,16]
  grad_smec_stage1_total_wrt_ads_logits  [16]
"""

import os

import torch
from safetensors.torch import save_file

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
OUT_PATH = os.path.join(ROOT, "tests/fixtures/paper/smec_paper.safetensors")

SEED = 20240611
D = 16
TRAJ = [16, 8, 4, 2]
NQ, NC, NMEM, TOPK = 4, 6, 12, 3
GUMBEL_TAU = 1.0
ALPHA = 1.0


def generate():
    g = torch.Generator().manual_seed(SEED)
    inp = {}
    inp["query_emb"] = torch.randn(NQ, D, generator=g)
    inp["corpus_emb"] = torch.randn(NC, D, generator=g)
    inp["relevance"] = torch.randint(0, 3, (NQ, NC), generator=g).to(torch.float64)
    inp["w_fc"] = torch.eye(D) + 0.3 * torch.randn(D, D, generator=g)
    inp["ads_logits"] = torch.randn(D, generator=g)
    u = torch.rand(D, generator=g)
    inp["gumbel_noise"] = -torch.log(-torch.log(u))
    inp["xbm_memory"] = torch.randn(NMEM, D, generator=g)
    return inp


def cos(a, b):
    return (a @ b) / (a.norm() * b.norm())


def rank_loss(eq, ec, y):
    """Eq. 8 for one dimension: eq [NQ, m], ec [NC, m] already truncated."""
    total = torch.zeros(())
    for i in range(eq.shape[0]):
        s = [cos(eq[i], ec[j]) for j in range(ec.shape[0])]
        for j in range(ec.shape[0]):
            for k in range(ec.shape[0]):
                if y[i, j] > y[i, k]:
                    total = total + (y[i, j] - y[i, k]) * torch.log1p(torch.exp(s[k] - s[j]))
    return total


def fc(e, w):
    return e @ w.T


def topk_idx(values, k):
    vals = [float(v) for v in values]
    return sorted(range(len(vals)), key=lambda j: (-vals[j], j))[:k]


def ads(logits, noise):
    z = torch.softmax((logits + noise) / GUMBEL_TAU, dim=0)
    sel = sorted(topk_idx(z.detach(), D // 2))
    return z, sel


def main():
    inp = generate()
    out = {}

    def put(name, t):
        assert name not in out, name
        out[name] = t.detach().clone().contiguous()

    for k, v in inp.items():
        put(k, v)
    q, c, y = inp["query_emb"], inp["corpus_emb"], inp["relevance"]

    def leaf(name):
        return inp[name].clone().requires_grad_(True)

    # ---- per-dim rank losses, MRL, SMRL -----------------------------------
    per_dim = []
    for m in TRAJ:
        w = leaf("w_fc")
        eq, ec = fc(q, w), fc(c, w)
        val = rank_loss(eq[:, :m], ec[:, :m], y)
        (g,) = torch.autograd.grad(val, [w])
        per_dim.append(val.detach())
        put(f"grad_rank_loss_dim{m}_wrt_w_fc", g)
    put("rank_loss_per_dim", torch.stack(per_dim))

    w = leaf("w_fc")
    eq, ec = fc(q, w), fc(c, w)
    mrl = sum(rank_loss(eq[:, :m], ec[:, :m], y) for m in TRAJ)
    (g,) = torch.autograd.grad(mrl, [w])
    put("mrl_rank_loss", mrl)
    put("grad_mrl_rank_loss_wrt_w_fc", g)

    stages = []
    for s in range(1, len(TRAJ)):
        w = leaf("w_fc")
        eq, ec = fc(q, w), fc(c, w)
        hi, lo = TRAJ[s - 1], TRAJ[s]
        val = rank_loss(eq[:, :hi], ec[:, :hi], y) + rank_loss(eq[:, :lo], ec[:, :lo], y)
        (g,) = torch.autograd.grad(val, [w])
        stages.append(val.detach())
        put(f"grad_smrl_stage{s}_wrt_w_fc", g)
    put("smrl_stage_loss", torch.stack(stages))

    # ---- ADS, stage 1 ------------------------------------------------------
    z0, sel = ads(inp["ads_logits"], inp["gumbel_noise"])
    put("ads_probs", z0)
    put("ads_selected_idx", torch.tensor(sel, dtype=torch.int64))
    for mode in ("soft", "st"):
        w, lg = leaf("w_fc"), leaf("ads_logits")
        z, sel_m = ads(lg, inp["gumbel_noise"])
        assert sel_m == sel
        eq, ec = fc(q, w), fc(c, w)
        if mode == "soft":
            weight = z[sel]
        else:
            weight = 1.0 + z[sel] - z[sel].detach()
        val = rank_loss(eq, ec, y) + rank_loss(eq[:, sel] * weight, ec[:, sel] * weight, y)
        gw, gl = torch.autograd.grad(val, [w, lg])
        put(f"ads_stage1_loss_{mode}", val)
        put(f"grad_ads_stage1_loss_{mode}_wrt_w_fc", gw)
        put(f"grad_ads_stage1_loss_{mode}_wrt_ads_logits", gl)

    # ---- S-XBM -------------------------------------------------------------
    e = torch.cat([q, c], dim=0)
    mem = inp["xbm_memory"]
    nbrs = [topk_idx([cos(e[i], mem[j]) for j in range(NMEM)], TOPK) for i in range(e.shape[0])]
    put("sxbm_neighbors", torch.tensor(nbrs, dtype=torch.int64))
    put("xbm_memory_after", torch.cat([mem, e], dim=0)[-NMEM:])

    def sxbm(w, d, teacher, low=None):
        fe, fm = fc(e, w), fc(mem, w)
        total = torch.zeros(())
        for i in range(e.shape[0]):
            for j in nbrs[i]:
                if teacher == "orig":
                    a = cos(e[i], mem[j])
                elif teacher == "fc_full":
                    a = cos(fe[i], fm[j])
                else:  # literal: prefix of the stored embedding itself
                    a = cos(e[i], mem[j])
                if teacher == "literal":
                    bb = cos(e[i, :d], mem[j, :d])
                elif low is not None:
                    bb = cos(low(fe[i]), low(fm[j]))
                else:
                    bb = cos(fe[i, :d], fm[j, :d])
                total = total + (a - bb).abs()
        return total

    for key, teacher in (("sxbm", "orig"), ("sxbm_alt_fc_full", "fc_full")):
        vals = []
        for d in TRAJ[1:]:
            w = leaf("w_fc")
            val = sxbm(w, d, teacher)
            (g,) = torch.autograd.grad(val, [w])
            vals.append(val.detach())
            put(f"grad_{key}_d{d}_wrt_w_fc", g)
        put(f"{key}_loss", torch.stack(vals))
    put("sxbm_alt_literal_loss",
        torch.stack([sxbm(inp["w_fc"], d, "literal") for d in TRAJ[1:]]))

    w, lg = leaf("w_fc"), leaf("ads_logits")
    z, _ = ads(lg, inp["gumbel_noise"])
    sx = sxbm(w, D // 2, "orig", low=lambda v: v[sel] * z[sel])
    gw, gl = torch.autograd.grad(sx, [w, lg])
    put("sxbm_ads_soft_d8", sx)
    put("grad_sxbm_ads_soft_d8_wrt_w_fc", gw)
    put("grad_sxbm_ads_soft_d8_wrt_ads_logits", gl)

    # ---- stage-1 total (eq. 9) --------------------------------------------
    w, lg = leaf("w_fc"), leaf("ads_logits")
    z, _ = ads(lg, inp["gumbel_noise"])
    eq, ec = fc(q, w), fc(c, w)
    rank = rank_loss(eq, ec, y) + rank_loss(eq[:, sel] * z[sel], ec[:, sel] * z[sel], y)
    total = rank + ALPHA * sxbm(w, D // 2, "orig", low=lambda v: v[sel] * z[sel])
    gw, gl = torch.autograd.grad(total, [w, lg])
    put("smec_stage1_total", total)
    put("grad_smec_stage1_total_wrt_w_fc", gw)
    put("grad_smec_stage1_total_wrt_ads_logits", gl)

    doc = __doc__
    for k in out:
        generic = k
        for pat, rep in (("dim16_", "dim{16,8,4,2}_"), ("dim8_", "dim{16,8,4,2}_"),
                         ("dim4_", "dim{16,8,4,2}_"), ("dim2_", "dim{16,8,4,2}_"),
                         ("stage1_wrt", "stage{1,2,3}_wrt"), ("stage2_wrt", "stage{1,2,3}_wrt"),
                         ("stage3_wrt", "stage{1,2,3}_wrt"), ("_d8_wrt", "_d{8,4,2}_wrt"),
                         ("_d4_wrt", "_d{8,4,2}_wrt"), ("_d2_wrt", "_d{8,4,2}_wrt")):
            generic = generic.replace(pat, rep)
        assert (k in doc) or (generic in doc), f"undocumented output key {k}"

    for k, t in out.items():
        if t.dtype != torch.int64:
            out[k] = t.to(torch.float64)
    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    save_file(out, OUT_PATH)
    for k in sorted(out):
        t = out[k]
        if t.numel() <= 4:
            print(f"{k:40s} {t.flatten().tolist()}")
    print(f"wrote {len(out)} tensors to {OUT_PATH}")


if __name__ == "__main__":
    main()
