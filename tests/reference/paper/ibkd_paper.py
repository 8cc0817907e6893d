"""Paper-only reference for IBKD (Zhang et al., "Text Representation
Distillation via Information Bottleneck Principle").

Written from /work/shared/papers/IBKD.md only, float64. Decisions and
alternative readings are listed in README.md next to this file.

Run (from the repository root):
    /work/venv/bin/python tests/reference/paper/ibkd_paper.py

Input : tests/fixtures/objectives/ibkd.safetensors, keys used (all other keys
        in that file are ignored): x [8,16] input representation X,
        s [8,12] student embeddings S, teacher [8,24] teacher embeddings T,
        w [24,12] projection matrix W, b [24] bias.
Output: tests/fixtures/paper/ibkd_paper.safetensors (all float64).

HSIC (sec. 3.2, eq. 6): HSIC(X,S) = (1/l^2) tr(K_X H K_S H), l = 8,
H = I - (1/l) 1 1^T, the same kernel for K_X (on x) and K_S (on s), raw
(unnormalised) vectors. Eq. 7 prints K(x_i,x_j) = exp(gamma ||x_i - x_j||) and
sec. 4.3 fixes gamma = 0.5. That printed form has a positive exponent (not a
kernel that decays with distance) and an unsquared norm, so several kernels
are computed; <k> is one of
  rbf_g05      exp(-0.5 ||a-b||^2)   PRIMARY: "RBF kernel" + gamma = 0.5, the
               printed formula read as having lost its minus sign and square
  rbf_g01      exp(-0.1 ||a-b||^2)
  rbf_median   exp(-||a-b||^2 / (2 sigma^2)), sigma = median of the 28
               off-diagonal pairwise distances of that variable (sigma_x for
               K_X, sigma_s for K_S), sigma treated as a constant (no gradient)
  laplace_g05  exp(-0.5 ||a-b||)     eq. 7 with only the sign fixed
  literal_g05  exp(+0.5 ||a-b||)     eq. 7 verbatim
  linear       <a, b>                (ablation, Table 4)
  imq_c1       (||a-b||^2 + 1)^(-1/2) (ablation, Table 4; c = 1 is my choice,
               the paper gives no constant)
Keys per kernel <k>:
  hsic_<k>                  []      HSIC(X, S)
  grad_hsic_<k>_wrt_s       [8,12]
  hsic_<k>_grad_norm_wrt_s  []      Frobenius norm of grad_hsic_<k>_wrt_s
  hsic_<k>_kx_offdiag_mean  []      mean of the 56 off-diagonal entries of K_X
  hsic_<k>_ks_offdiag_mean  []      same for K_S (near 0 = saturated kernel,
                                    K ~ I, no gradient)
  rbf_median_sigma_x, rbf_median_sigma_s  []  the median distances used

Contrastive term (sec. 3.1, eqs. 3-5): sim(s_i, t_j) = exp(s_i^T W t_j / tau).
The paper's W must be [12 x 24] for s_i^T W t_j; the fixture's w is [24,12],
i.e. W = w^T, so s_i^T W t_j = (w s_i) . t_j: w maps the student (12) into the
teacher space (24), PyTorch-Linear layout y = s w^T. tau = 0.1 (Table 1,
distillation stage). Anchor = student s_i, candidates = all teachers t_j of
the batch (positive t_i, in-batch negatives). Loss (positive, minimised):
  nce = -(1/n) sum_i log( e^{score_ii} / sum_j e^{score_ij} ),
  score_ij = (w s_i) . t_j / tau.
Paper's L_nce (eq. 3, the log-ratio that lower-bounds I(S,T) - log(M+1)) is
-nce; eq. 8 L_IB = -(L_nce - beta_1 HSIC) = nce + beta_1 HSIC, beta_1 = 1.0.
  nce                       []      primary (no bias, tau 0.1)
  grad_nce_wrt_s            [8,12]
  grad_nce_wrt_w            [24,12]
  nce_alt_bias              []      score_ij = (w s_i + b) . t_j / tau
  grad_nce_alt_bias_wrt_s   [8,12]
  grad_nce_alt_bias_wrt_w   [24,12]
  grad_nce_alt_bias_wrt_b   [24]
  nce_alt_tau005            []      tau = 0.05 (Table 1, fine-tuning stage)
  grad_nce_alt_tau005_wrt_s [8,12]
  grad_nce_alt_tau005_wrt_w [24,12]
  nce_alt_double_positive   []      eq. 5 verbatim: denominator
                                    sim(s_i,t_i) + sum_{j=1..n} sim(s_i,t_j)
                                    (positive counted twice)
  grad_nce_alt_double_positive_wrt_s [8,12]
  grad_nce_alt_double_positive_wrt_w [24,12]
  ib_loss                   []      eq. 8: nce + 1.0 * hsic_rbf_g05
  grad_ib_loss_wrt_s        [8,12]
  grad_ib_loss_wrt_w        [24,12]
The teacher is frozen (no teacher gradients are output); x is data.
"""

import math
import os

import torch
from safetensors import safe_open
from safetensors.torch import save_file

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
IN_PATH = os.path.join(ROOT, "tests/fixtures/objectives/ibkd.safetensors")
OUT_PATH = os.path.join(ROOT, "tests/fixtures/paper/ibkd_paper.safetensors")

GAMMA = 0.5  # sec. 4.3
TAU = 0.1  # Table 1, distillation stage
BETA1 = 1.0  # sec. 4.3
INPUT_KEYS = ["x", "s", "teacher", "w", "b"]


def load_inputs():
    with safe_open(IN_PATH, "pt") as f:
        return {k: f.get_tensor(k).to(torch.float64) for k in INPUT_KEYS}


def pair_sqdist(V, i, j):
    return (V[i] - V[j]).pow(2).sum()


def median_distance(V):
    n = V.shape[0]
    d = [float(pair_sqdist(V, i, j).sqrt()) for i in range(n) for j in range(i + 1, n)]
    d.sort()
    m = len(d)
    return 0.5 * (d[m // 2 - 1] + d[m // 2]) if m % 2 == 0 else d[m // 2]


def gram(V, kind, sigma=None):
    """Kernel matrix built entry by entry; the diagonal never goes through
    sqrt(0), so unsquared-norm kernels keep finite gradients."""
    n = V.shape[0]
    rows = []
    for i in range(n):
        row = []
        for j in range(n):
            if kind == "linear":
                row.append(V[i] @ V[j])
                continue
            if i == j:
                sq = torch.zeros(())
                dist = torch.zeros(())
            else:
                sq = pair_sqdist(V, i, j)
                dist = sq.sqrt()
            if kind == "rbf_g05":
                row.append(torch.exp(-0.5 * sq))
            elif kind == "rbf_g01":
                row.append(torch.exp(-0.1 * sq))
            elif kind == "rbf_median":
                row.append(torch.exp(-sq / (2.0 * sigma * sigma)))
            elif kind == "laplace_g05":
                row.append(torch.exp(-GAMMA * dist))
            elif kind == "literal_g05":
                row.append(torch.exp(GAMMA * dist))
            elif kind == "imq_c1":
                row.append(1.0 / torch.sqrt(sq + 1.0))
            else:
                raise ValueError(kind)
        rows.append(torch.stack(row))
    return torch.stack(rows)


def hsic(KX, KS):
    l = KX.shape[0]
    H = torch.eye(l) - torch.ones(l, l) / l
    return torch.trace(KX @ H @ KS @ H) / (l * l)  # eq. 6


def offdiag_mean(K):
    n = K.shape[0]
    return (K.sum() - torch.diagonal(K).sum()) / (n * (n - 1))


def nce_loss(s, t, w, b=None, tau=TAU, double_positive=False):
    proj = s @ w.T  # w s_i for every row
    if b is not None:
        proj = proj + b
    scores = proj @ t.T / tau  # [n, n], scores[i, j] = (w s_i) . t_j / tau
    n = scores.shape[0]
    terms = []
    for i in range(n):
        pos = scores[i, i]
        if double_positive:
            denom = torch.logsumexp(torch.cat([pos.reshape(1), scores[i]]), dim=0)
        else:
            denom = torch.logsumexp(scores[i], dim=0)
        terms.append(-(pos - denom))
    return torch.stack(terms).mean()


def main():
    inp = load_inputs()
    out = {}

    def put(name, t):
        assert name not in out, name
        out[name] = t.detach().clone().contiguous().to(torch.float64)

    x, t = inp["x"], inp["teacher"]

    sig_x = median_distance(x)
    sig_s = median_distance(inp["s"])
    put("rbf_median_sigma_x", torch.tensor(sig_x))
    put("rbf_median_sigma_s", torch.tensor(sig_s))

    hsic_primary_s = None
    for kind in ["rbf_g05", "rbf_g01", "rbf_median", "laplace_g05", "literal_g05", "linear", "imq_c1"]:
        s = inp["s"].clone().requires_grad_(True)
        KX = gram(x, kind, sig_x)
        KS = gram(s, kind, sig_s)
        val = hsic(KX, KS)
        (g,) = torch.autograd.grad(val, [s])
        put(f"hsic_{kind}", val)
        put(f"grad_hsic_{kind}_wrt_s", g)
        put(f"hsic_{kind}_grad_norm_wrt_s", g.norm())
        put(f"hsic_{kind}_kx_offdiag_mean", offdiag_mean(KX))
        put(f"hsic_{kind}_ks_offdiag_mean", offdiag_mean(KS))

    variants = {
        "nce": {},
        "nce_alt_bias": {"bias": True},
        "nce_alt_tau005": {"tau": 0.05},
        "nce_alt_double_positive": {"double_positive": True},
    }
    for name, cfg in variants.items():
        s = inp["s"].clone().requires_grad_(True)
        w = inp["w"].clone().requires_grad_(True)
        b = inp["b"].clone().requires_grad_(True)
        val = nce_loss(s, t, w, b if cfg.get("bias") else None,
                       tau=cfg.get("tau", TAU),
                       double_positive=cfg.get("double_positive", False))
        wrt = [s, w] + ([b] if cfg.get("bias") else [])
        gs = torch.autograd.grad(val, wrt)
        put(name, val)
        put(f"grad_{name}_wrt_s", gs[0])
        put(f"grad_{name}_wrt_w", gs[1])
        if cfg.get("bias"):
            put(f"grad_{name}_wrt_b", gs[2])

    s = inp["s"].clone().requires_grad_(True)
    w = inp["w"].clone().requires_grad_(True)
    ib = nce_loss(s, t, w) + BETA1 * hsic(gram(x, "rbf_g05"), gram(s, "rbf_g05"))
    gs, gw = torch.autograd.grad(ib, [s, w])
    put("ib_loss", ib)
    put("grad_ib_loss_wrt_s", gs)
    put("grad_ib_loss_wrt_w", gw)

    doc = __doc__
    for k in out:
        generic = k
        for kind in ["rbf_g05", "rbf_g01", "rbf_median", "laplace_g05", "literal_g05", "linear", "imq_c1"]:
            generic = generic.replace(f"hsic_{kind}", "hsic_<k>")
        assert (k in doc) or (generic in doc), f"undocumented output key {k}"

    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    save_file(out, OUT_PATH)
    for k in sorted(out):
        if out[k].numel() == 1:
            print(f"{k:45s} {out[k].item(): .12g}")
    print(f"wrote {len(out)} tensors to {OUT_PATH}")


if __name__ == "__main__":
    main()
