"""Reference values for Nest's MIPIC (SIA, PIC) and MIC (SCR, SIR) terms (run once; the output is committed).

    /path/to/venv/bin/python tests/reference/structure.py   # from the repository root

Writes tests/fixtures/objectives/structure.safetensors: fixed float64 inputs and the terms computed here
straight from the papers' formulas, one sequence at a time and in the papers' own forms (feature-space
covariances for CKA, eq. 11; per-sequence moments for SCR), so that Nest's batched, masked,
token-space implementation is checked against an independent computation.

Inputs: B = 5 sequences of up to 12 tokens with real lengths 12, 7, 3, 2, 10 (padding in every row but
the first; the length-2 row has one candidate token, so it sits out of CKA, and with min_k = 3 the
length-3 row asks for more tokens than it has), hidden size D = 32, 3 layers (+ embeddings), dims
4, 8, 16, 32 (32 = D), top-k ratios 0.2, 0.3, 0.4, 0.5, attention temperature 0.7, PIC temperature
0.05, random P_i and phi_i; and a batch of one.

Conventions (as documented in crates/nest-train/src/objective/mipic/ and mic.rs):
- SIA's candidate tokens are the real tokens after [CLS]; k_i = min(m, max(min_k, ceil(gamma_i m)))
  with m their count; KL(a_i || a_D) as eq. 6 writes it; a sequence with < 2 selected tokens sits out
  of the CKA mean.
- PIC: checkpoint layers ceil(i N / n) = 1, 2, 3, 3; mean pooling; phi = Linear-GELU(erf)-Linear.
- MIC: eps = 1e-5 in the standardisation, the CV ratio and the log; SCR is summed over the dims below D,
  SIR over all dims, both divided by |layers| * |dims|.
"""
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EPS = 1e-5
torch.set_default_dtype(torch.float64)


def att_kl(h, mask, P, tau):
    B, S, D = h.shape
    d = P.shape[0]
    out = []
    for b in range(B):
        n = int(mask[b].sum())
        if n < 2:
            out.append(torch.tensor(0.0))
            continue
        cls, toks = h[b, 0], h[b, 1:n]
        s_t = toks @ cls / math.sqrt(D)
        s_s = (toks[:, :d] @ P) @ cls / math.sqrt(D)  # h_CLS . P^T h_j[:d]
        a_s, a_t = F.softmax(s_s / tau, -1), F.softmax(s_t / tau, -1)
        out.append((a_s * (a_s.log() - a_t.log())).sum())
    return torch.stack(out).mean()


def cka_loss(h, mask, d, gamma, min_k):
    B, S, D = h.shape
    out = []
    for b in range(B):
        n = int(mask[b].sum())
        m = n - 1
        cls, toks = h[b, 0], h[b, 1:n]
        k = min(m, max(min_k, math.ceil(gamma * m)))
        if k < 2:
            continue
        order = torch.argsort(toks @ cls / math.sqrt(D), descending=True)[:k]
        X, Y = toks[order, :d], toks[order]
        Xc, Yc = X - X.mean(0), Y - Y.mean(0)
        cka = (Xc.T @ Yc).norm() ** 2 / ((Xc.T @ Xc).norm() * (Yc.T @ Yc).norm())
        out.append(1 - cka)
    return torch.stack(out).mean() if out else torch.tensor(0.0)


def mean_pool(h, mask):
    m = mask[..., None].double()
    return (h * m).sum(1) / m.sum(1)


def phi(z, w):
    return F.linear(F.gelu(F.linear(z, w[0], w[1])), w[2], w[3])


def info_nce(a, b, tau):
    logits = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / tau
    return F.cross_entropy(logits, torch.arange(a.shape[0]))


def scr(h, mask, d, tau_corr, lam):
    B, S, D = h.shape
    C = torch.zeros(d, D - d)
    sigmas = []
    for b in range(B):
        n = int(mask[b].sum())
        H = h[b, :n]
        mu, sigma = H.mean(0), H.std(0, unbiased=False)
        X = (H - mu) / (sigma + EPS)
        C += X[:, :d].T @ X[:, d:] / n
        sigmas.append(sigma)
    C /= B
    sig = torch.stack(sigmas)
    corr = ((C.abs() - tau_corr).clamp(min=0) ** 2).mean()
    var = (1 - sig[:, :d].mean()).clamp(min=0) + 0.5 * (1 - sig[:, d:].mean()).clamp(min=0)
    return corr + lam * var


def sir(z, t):
    B = z.shape[0]
    v = z.var(0, unbiased=False)
    cv = ((v - v.mean()) ** 2).mean().sqrt() / (v.mean() + EPS)
    if B < 2:
        return cv / 2
    zn = F.normalize(z, dim=-1)
    K = torch.exp(-2 * t * (1 - zn @ zn.T))
    unif = torch.log((K.sum() - K.trace()) / (B * (B - 1)) + EPS)
    return (cv + unif) / 2


def main():
    g = torch.Generator().manual_seed(808)
    B, S, D, N = 5, 12, 32, 3
    dims, gammas, min_k, tau_att, tau_pic = [4, 8, 16, 32], [0.2, 0.3, 0.4, 0.5], 3, 0.7, 0.05
    t = {}
    mask = torch.zeros(B, S, dtype=torch.int64)
    for b, n in enumerate([12, 7, 3, 2, 10]):
        mask[b, :n] = 1
    t["mask"] = mask
    hidden = [torch.randn(B, S, D, generator=g) * (1 + 0.3 * l) for l in range(N + 1)]
    for l in range(N + 1):
        t[f"h{l}"] = hidden[l]
    P = {d: torch.randn(d, D, generator=g) / math.sqrt(d) for d in dims}
    for d in dims:
        t[f"p{d}"] = P[d]
    W = {}
    for a, b in zip(dims, dims[1:]):
        W[a] = [torch.randn(b, a, generator=g) / math.sqrt(a), torch.randn(b, generator=g) * 0.1,
                torch.randn(b, b, generator=g) / math.sqrt(b), torch.randn(b, generator=g) * 0.1]
        for i, w in enumerate(W[a]):
            t[f"phi{a}_{i}"] = w
    # every term on its own, at every layer and dim (d = D included)
    for l in range(1, N + 1):
        for d, gm in zip(dims, gammas):
            t[f"att_l{l}_d{d}"] = att_kl(hidden[l], mask, P[d], tau_att).reshape(1)
            t[f"cka_l{l}_d{d}"] = cka_loss(hidden[l], mask, d, gm, min_k).reshape(1)
            if d < D:
                t[f"scr_l{l}_d{d}"] = scr(hidden[l], mask, d, 0.1, 0.1).reshape(1)
            t[f"sir_l{l}_d{d}"] = sir(mean_pool(hidden[l], mask)[:, :d], 2.0).reshape(1)
    # MIPIC's totals: SIA at layers 1..3 over the prefix dims 4, 8, 16; PIC over checkpoints (4,1) (8,2) (16,3) (32,3)
    sia_att = sum(att_kl(hidden[l], mask, P[d], tau_att) for l in (1, 2, 3) for d in dims[:3])
    sia_cka = sum(cka_loss(hidden[l], mask, d, gm, min_k) for l in (1, 2, 3) for d, gm in zip(dims[:3], gammas))
    ck = [1, 2, 3, 3]
    z = [mean_pool(hidden[l], mask)[:, :d] for l, d in zip(ck, dims)]
    pic = sum(info_nce(phi(z[i], W[dims[i]]), z[i + 1], tau_pic) for i in range(3))
    t["mipic_att"], t["mipic_cka"], t["mipic_pic"] = sia_att.reshape(1), sia_cka.reshape(1), pic.reshape(1)
    # MIC's L_align parts at layers 1 and 3 over all four dims
    layers = [1, 3]
    count = len(layers) * len(dims)
    t["mic_scr"] = (sum(scr(hidden[l], mask, d, 0.1, 0.1) for l in layers for d in dims[:3]) / count).reshape(1)
    t["mic_sir"] = (sum(sir(mean_pool(hidden[l], mask)[:, :d], 2.0) for l in layers for d in dims) / count).reshape(1)
    # a batch of one (length 9, padded to 12)
    h1 = torch.randn(1, S, D, generator=g)
    m1 = torch.zeros(1, S, dtype=torch.int64)
    m1[0, :9] = 1
    t["one_h"], t["one_mask"] = h1, m1
    t["one_att"] = att_kl(h1, m1, P[8], tau_att).reshape(1)
    t["one_cka"] = cka_loss(h1, m1, 8, 0.3, min_k).reshape(1)
    t["one_scr"] = scr(h1, m1, 8, 0.1, 0.1).reshape(1)
    t["one_sir"] = sir(mean_pool(h1, m1)[:, :8], 2.0).reshape(1)
    out = os.path.join(ROOT, "tests", "fixtures", "objectives", "structure.safetensors")
    save_file({k: v.contiguous() for k, v in t.items()}, out)
    print(f"wrote {out}: {len(t)} tensors")
    for k in sorted(t):
        if t[k].numel() == 1:
            print(f"  {k} = {t[k].item():.10f}")


if __name__ == "__main__":
    main()
