"""Paper-only reference for MIPIC (SIA + PIC) and MIC (SCR + SIR).

Written from /work/shared/papers/MIPIC.md and /work/shared/papers/MIC.md only,
float64, the plainest way (python loops over sequences). Every decision that
the papers leave open is listed in README.md next to this file and, briefly,
at the place in the code where it is made.

Run (from the repository root):
    /work/venv/bin/python tests/reference/paper/structure_paper.py

Input : tests/fixtures/objectives/structure.safetensors, keys used (all other
        keys in that file are ignored):
        h0..h3 [5,12,32] token states (h0 = embeddings, unused by every term
        below because the configured layers are 1..3), mask [5,12],
        p4 [4,32], p8 [8,32], p16 [16,32], p32 [32,32] (MIPIC P_i),
        phi{4,8,16}_{0,1,2,3} (PIC projectors: Linear -> exact GELU -> Linear).
Output: tests/fixtures/paper/structure_paper.safetensors (all float64 except
        the *_k keys, which are int64 token counts).

Settings (given, not read from the fixture): prefix dims 4,8,16,32 (D=32);
layers 1..3; SIA gamma = 0.2,0.3,0.4,0.5, k_min = 3, k <= #candidates,
attention temperature 0.7; PIC temperature 0.05, checkpoints
(4,1),(8,2),(16,3),(32,3); MIC layers {1,3}, tau_corr = 0.1,
lambda_var = 0.1, t = 2; MIC epsilon = 1e-6 (paper names eps, gives no value).

Conventions
-----------
* B = 5 sequences, T = 12 positions, D = 32, position 0 = [CLS].
* "per_layer_dim" arrays are [3 layers (1,2,3), 4 dims (4,8,16,32)] for SIA,
  [2 layers (1,3), 4 dims] for MIC SIR and [2 layers (1,3), 3 dims (4,8,16)]
  for MIC SCR (SCR needs d < d_full, so d = 32 has no SCR term).
* grad_<term>_wrt_<input> has the shape of <input>.

MIPIC / SIA (MIPIC eqs. 4-14)
-----------------------------
Primary reading ("sia*" keys without "_alt_"):
  candidate tokens j = real (mask=1) non-[CLS] tokens ("the j-th contextual
  token", eq. 4); teacher a_D = softmax(h_CLS.h_j/sqrt(D)/0.7) (eq. 4);
  student a_i = softmax(h_CLS.(P_i^T h_j[:d_i])/sqrt(D)/0.7) (eq. 5);
  L_att^(i) = KL(a_i || a_D) = sum_j a_i log(a_i/a_D) (eq. 6, literal order);
  h_CLS (full dim, same layer) and the teacher a_D are stop-gradient
  ("fixed semantic reference", "teacher ... ground truth").
  k_i = min(max(3, ceil(gamma_i * m)), #candidates) with m = number of real
  tokens of the sequence incl. [CLS] ("m is the sequence length", A.5),
  ceil computed in exact rational arithmetic; S_k = top-k candidates by a_D.
  CKA (eqs. 7-11): rows = the k selected tokens, student h_i = H[S_k, :d_i],
  teacher H_i = H[S_k, :] (stop-gradient: "full-dimensional representation
  teaches its lower-dimensional prefix"); centring subtracts the mean over
  the k tokens (eq. 8); HSIC = ||h~^T H~||_F^2 (eq. 9, the only
  dimensionally valid reading: d_i x D cross-covariance);
  L_CKA = 1 - CKA (eq. 12). A sequence with k < 2 has zero centred matrices
  (CKA = 0/0): it is left out of that (layer, dim)'s CKA mean (here: sequence
  3 with 1 candidate token).
  Batch: each (layer, dim) term is the mean over sequences (the paper does not
  say; MIPIC eq. 16 uses an expectation for PIC). Total (eqs. 13-14):
  L_SIA = sum over layers {1,2,3} sum over dims {4,8,16,32} (att + CKA).
  d = D = 32 is included (eq. 13 sums i = 1..n); at d = D, CKA = 1 exactly.

SIA keys (primary):
  sia                         []      L_SIA = sia_att + sia_cka
  sia_att                     []      sum_l sum_d mean_b KL(a_i || a_D)
  sia_cka                     []      sum_l sum_d mean_b (1 - CKA) (k>=2 rows)
  sia_att_per_layer_dim       [3,4]   mean_b KL per (layer, dim)
  sia_cka_per_layer_dim       [3,4]   mean_b (1-CKA) per (layer, dim)
  sia_k                       [5,4]   int64, k per (sequence, dim)
  grad_sia_wrt_h{1,2,3}       [5,12,32]
  grad_sia_wrt_p{4,8,16,32}   [d,32]
  grad_sia_att_wrt_h{1,2,3}   [5,12,32]
  grad_sia_att_wrt_p{4,8,16,32} [d,32]
  grad_sia_cka_wrt_h{1,2,3}   [5,12,32]   (CKA does not involve P_i)
SIA alternatives, each differs from the primary in ONE choice; for each
<v> the keys are sia_alt_<v>, sia_alt_<v>_att, sia_alt_<v>_cka,
sia_alt_<v>_att_per_layer_dim [3,4], sia_alt_<v>_cka_per_layer_dim [3,4],
sia_alt_<v>_k [5,4] (int64), grad_sia_alt_<v>_wrt_h{1,2,3},
grad_sia_alt_<v>_wrt_p{4,8,16,32}:
  <v> = incl_cls        [CLS] is also a candidate token (scores, top-k, CKA)
  <v> = kl_teacher_first L_att = KL(a_D || a_i) (usual distillation order)
  <v> = no_detach       nothing is stop-gradient (teacher scores, h_CLS,
                        CKA teacher all carry gradient)
  <v> = m_padded        m = padded length T = 12 in k = max(3, ceil(gamma m))
  <v> = m_candidates    m = number of candidate tokens
  <v> = no_full_dim     dims {4,8,16} only (A.5: "align the first 6
                        lower-dimensional prefixes against the full-
                        dimensional teacher"); per_layer_dim arrays keep 4
                        columns with the d = 32 column set to 0 (also 0
                        in sia_alt_no_full_dim_k)

MIPIC / PIC (MIPIC eqs. 15-17)
------------------------------
Primary: z_i = [CLS] state of layer l_i truncated to d_i ("truncated [CLS]
representation", sec. 3.3); u_i = phi_i(z_i); logits[b,c] =
cos(u_i[b], z_{i+1}[c]) / 0.05; L_chain^(i) = mean_b -log softmax_c(logits)[b,b]
(eq. 16, B_{i+1} = the batch's z_{i+1}, positive = same sequence; sim =
cosine as in MIPIC eq. 19); no stop-gradient (eq. 16 has none);
L_PIC = sum_{i=1..3} L_chain^(i) (eq. 17). Checkpoints (4,1),(8,2),(16,3),(32,3).
  pic                          []   L_PIC
  pic_per_step                 [3]  L_chain^(1..3) (4->8, 8->16, 16->32)
  grad_pic_wrt_h{1,2,3}        [5,12,32]
  grad_pic_wrt_phi{4,8,16}_{0,1,2,3}   shape of that parameter
Alternatives (<v>; keys pic_alt_<v>, pic_alt_<v>_per_step [3],
grad_pic_alt_<v>_wrt_h{1,2,3}, grad_pic_alt_<v>_wrt_phi{4,8,16}_{0..3}):
  <v> = mean_pool           z_i = masked mean over real tokens (incl. [CLS])
  <v> = stopgrad            target z_{i+1} is stop-gradient
  <v> = mean_pool_stopgrad  both

  mipic_sia_plus_pic    []  sia + pic (the bracket of eq. 18; eq. 18 then
                            multiplies it by (1 - alpha) and adds alpha L_MRL)

MIC (SCR sec. 2.1, SIR sec. 2.2, L_align sec. 2.3)
--------------------------------------------------
Per layer l in {1,3} and d in {4,8,16,32}:
  SCR (d < 32 only): per-sequence masked mean / biased std over the real
  tokens (incl. [CLS]) of the prefix H[:, :, :d] and of the residual
  H[:, :, d:]; X~ = M (H - mu) / (sigma + eps); C = (1/B) sum_i (1/N_i)
  sum_l X~pre X~res^T; L_corr = mean_{u,v} max(0,|C_uv| - 0.1)^2;
  sigma_bar = mean over sequences and dims of sigma_i (no eps);
  L_var = max(0, 1 - sigma_bar_pre) + 0.5 max(0, 1 - sigma_bar_res);
  L_SCR = L_corr + 0.1 L_var.
  SIR: Z = masked mean over real tokens (incl. [CLS]) of H[:, :, :d];
  v_j = biased batch variance; L_cv = std_j(v) / (mean_j(v) + eps) (1/d std);
  Zhat = row-normalised Z, S = Zhat Zhat^T, K = exp(-2 t (1 - S)), t = 2;
  L_unif = log((1^T K 1 - tr K) / (B (B-1)) + eps); L_SIR = (L_cv + L_unif)/2.
  Nothing is stop-gradient.
Primary total: L_align = (1/(|L| |D|)) sum_l sum_d (L_SCR + L_SIR) with
|L| = 2, |D| = 4 and the absent SCR at d = 32 counted as 0.
  mic_align                  []     L_align = mic_scr + mic_sir
  mic_scr                    []     (1/8) sum_{l, d<32} L_SCR
  mic_sir                    []     (1/8) sum_{l, d} L_SIR
  mic_corr_per_layer_dim     [2,3]  L_corr (layers 1,3; dims 4,8,16)
  mic_var_per_layer_dim      [2,3]  L_var
  mic_scr_per_layer_dim      [2,3]  L_SCR
  mic_cv_per_layer_dim       [2,4]  L_cv (dims 4,8,16,32)
  mic_unif_per_layer_dim     [2,4]  L_unif
  mic_sir_per_layer_dim      [2,4]  L_SIR
  grad_mic_align_wrt_h{1,2,3}, grad_mic_scr_wrt_h{1,2,3},
  grad_mic_sir_wrt_h{1,2,3}  [5,12,32]   (h2 gradients are zero: layer 2
                                          is not a MIC layer)
Alternative: |D| = {4,8,16} (only dims with d < d_full) for both SCR and SIR,
normalised by 2*3:
  mic_alt_trunc_dims_only_align  []
  grad_mic_alt_trunc_dims_only_align_wrt_h{1,2,3}  [5,12,32]
Sensitivity to the unstated epsilon: the primary reading recomputed with
eps = 0 (sigma + 0, vbar + 0, log(. + 0)); differs from mic_align by ~1e-5
relative, mostly through log(. + eps) in L_unif:
  mic_alt_eps0_align  []
  grad_mic_alt_eps0_align_wrt_h{1,2,3}  [5,12,32]
"""

import math
import os
import sys
from fractions import Fraction

import torch
from safetensors import safe_open
from safetensors.torch import save_file

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
IN_PATH = os.path.join(ROOT, "tests/fixtures/objectives/structure.safetensors")
OUT_PATH = os.path.join(ROOT, "tests/fixtures/paper/structure_paper.safetensors")

DIMS = [4, 8, 16, 32]
FULL_D = 32
SIA_LAYERS = [1, 2, 3]
GAMMA = {4: "0.2", 8: "0.3", 16: "0.4", 32: "0.5"}  # exact decimals
K_MIN = 3
ATT_TAU = 0.7
PIC_TAU = 0.05
PIC_CHECKPOINTS = [(4, 1), (8, 2), (16, 3), (32, 3)]  # (dim, layer)
MIC_LAYERS = [1, 3]
TAU_CORR = 0.1
LAMBDA_VAR = 0.1
UNIF_T = 2.0
EPS = 1e-6

INPUT_KEYS = (["h0", "h1", "h2", "h3", "mask", "p4", "p8", "p16", "p32"]
              + [f"phi{d}_{j}" for d in (4, 8, 16) for j in range(4)])


def load_inputs():
    t = {}
    with safe_open(IN_PATH, "pt") as f:
        for k in INPUT_KEYS:  # only the documented input keys are read
            t[k] = f.get_tensor(k).to(torch.float64) if k != "mask" else f.get_tensor(k)
    return t


def fresh_leaves(inp):
    """Independent leaf copies so every term gets its own gradients."""
    leaves = {}
    for k, v in inp.items():
        if k == "mask":
            leaves[k] = v.clone()
        else:
            leaves[k] = v.detach().clone().requires_grad_(True)
    return leaves


def grads(loss, leaves, names):
    ts = [leaves[n] for n in names]
    gs = torch.autograd.grad(loss, ts, allow_unused=True, retain_graph=True)
    return {n: (torch.zeros_like(t) if g is None else g) for n, t, g in zip(names, ts, gs)}


# ----------------------------------------------------------------------------
# SIA
# ----------------------------------------------------------------------------

def ceil_frac(gamma_str, m):
    q = Fraction(gamma_str) * m
    return -((-q.numerator) // q.denominator)


def topk_desc(values, k):
    """Indices of the k largest values; ties broken by lower index."""
    vals = [float(v) for v in values]
    order = sorted(range(len(vals)), key=lambda j: (-vals[j], j))
    return order[:k]


def linear_cka(x, y):
    """Linear CKA between x [k, d] and y [k, D] (MIPIC eqs. 8-11)."""
    k = x.shape[0]
    centre = torch.eye(k) - torch.ones(k, k) / k
    xc = centre @ x  # subtract the mean over the k tokens (eq. 8)
    yc = centre @ y
    hsic_xy = (xc.T @ yc).pow(2).sum()  # ||cov(x~^T, y~^T)||_F^2, eq. 9
    n_xx = (xc.T @ xc).pow(2).sum().sqrt()
    n_yy = (yc.T @ yc).pow(2).sum().sqrt()
    return hsic_xy / (n_xx * n_yy)  # eq. 11


def sia(leaves, include_cls=False, kl_student_first=True, detach=True,
        m_mode="real", dims=DIMS):
    mask = leaves["mask"]
    B, T = mask.shape
    att = torch.zeros(len(SIA_LAYERS), len(DIMS))
    cka = torch.zeros(len(SIA_LAYERS), len(DIMS))
    att_terms = [[[] for _ in DIMS] for _ in SIA_LAYERS]
    cka_terms = [[[] for _ in DIMS] for _ in SIA_LAYERS]
    kmat = torch.zeros(B, len(DIMS), dtype=torch.int64)
    for li, layer in enumerate(SIA_LAYERS):
        H_all = leaves[f"h{layer}"]
        for b in range(B):
            L = int(mask[b].sum())
            cand = list(range(0 if include_cls else 1, L))
            n = len(cand)
            H = H_all[b]
            hcls = H[0]
            Hc = H[cand]  # [n, D]
            hcls_ref = hcls.detach() if detach else hcls
            Hc_t = Hc.detach() if detach else Hc
            # eq. 4: teacher scores / distribution
            s_D = (Hc_t @ hcls_ref) / math.sqrt(FULL_D)
            logp_D = torch.log_softmax(s_D / ATT_TAU, dim=0)
            for di, d in enumerate(DIMS):
                if d not in dims:
                    continue
                P = leaves[f"p{d}"]  # [d, D]
                # eq. 5: student scores h_CLS . (P_i^T h_j[:d]) / sqrt(D)
                s_i = ((Hc[:, :d] @ P) @ hcls_ref) / math.sqrt(FULL_D)
                logp_i = torch.log_softmax(s_i / ATT_TAU, dim=0)
                if kl_student_first:  # eq. 6 literal: KL(a_i || a_D)
                    kl = (logp_i.exp() * (logp_i - logp_D)).sum()
                else:
                    kl = (logp_D.exp() * (logp_D - logp_i)).sum()
                att_terms[li][di].append(kl)
                # top-k (A.5): k = max(k_min, ceil(gamma m)), capped at n
                if m_mode == "real":
                    m = L
                elif m_mode == "padded":
                    m = T
                elif m_mode == "candidates":
                    m = n
                else:
                    raise ValueError(m_mode)
                k = min(max(K_MIN, ceil_frac(GAMMA[d], m)), n)
                kmat[b, di] = k
                if k < 2:
                    continue  # centred matrices are zero: CKA undefined
                idx = topk_desc(logp_D.detach(), k)
                h_sel = Hc[idx, :d]
                H_sel = Hc_t[idx, :]
                cka_terms[li][di].append(1.0 - linear_cka(h_sel, H_sel))
    total_att = torch.zeros(())
    total_cka = torch.zeros(())
    for li in range(len(SIA_LAYERS)):
        for di, d in enumerate(DIMS):
            if d not in dims:
                continue
            a = torch.stack(att_terms[li][di]).mean()
            c = torch.stack(cka_terms[li][di]).mean()
            att[li, di] = a.detach()
            cka[li, di] = c.detach()
            total_att = total_att + a
            total_cka = total_cka + c
    return total_att, total_cka, att, cka, kmat


# ----------------------------------------------------------------------------
# PIC
# ----------------------------------------------------------------------------

def gelu_exact(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def phi(leaves, d, x):
    w0, b0 = leaves[f"phi{d}_0"], leaves[f"phi{d}_1"]
    w1, b1 = leaves[f"phi{d}_2"], leaves[f"phi{d}_3"]
    return gelu_exact(x @ w0.T + b0) @ w1.T + b1


def pool(leaves, layer, mode):
    H = leaves[f"h{layer}"]
    mask = leaves["mask"]
    rows = []
    for b in range(H.shape[0]):
        if mode == "cls":
            rows.append(H[b, 0])
        else:
            L = int(mask[b].sum())
            rows.append(H[b, :L].sum(0) / L)
    return torch.stack(rows)


def cosine_matrix(a, b):
    an = a / a.norm(dim=1, keepdim=True)
    bn = b / b.norm(dim=1, keepdim=True)
    return an @ bn.T


def pic(leaves, pooling="cls", stopgrad=False):
    zs = [pool(leaves, layer, pooling)[:, :d] for d, layer in PIC_CHECKPOINTS]
    steps = []
    for i in range(len(PIC_CHECKPOINTS) - 1):
        d_i = PIC_CHECKPOINTS[i][0]
        u = phi(leaves, d_i, zs[i])
        tgt = zs[i + 1].detach() if stopgrad else zs[i + 1]
        logits = cosine_matrix(u, tgt) / PIC_TAU
        logp = torch.log_softmax(logits, dim=1)
        B = logits.shape[0]
        steps.append(-torch.stack([logp[b, b] for b in range(B)]).mean())
    steps = torch.stack(steps)
    return steps.sum(), steps


# ----------------------------------------------------------------------------
# MIC
# ----------------------------------------------------------------------------

def masked_moments(X, L):
    """X [T, k] for one sequence; mean / biased std over its first L rows."""
    mu = X[:L].sum(0) / L
    var = (X[:L] - mu).pow(2).sum(0) / L
    return mu, var.sqrt()


def scr(leaves, layer, d):
    H = leaves[f"h{layer}"]
    mask = leaves["mask"]
    B, T, D = H.shape
    d_res = D - d
    C = torch.zeros(d, d_res)
    sig_pre, sig_res = [], []
    for i in range(B):
        L = int(mask[i].sum())
        M = mask[i].to(torch.float64).unsqueeze(1)
        pre, res = H[i, :, :d], H[i, :, d:]
        mu_p, sd_p = masked_moments(pre, L)
        mu_r, sd_r = masked_moments(res, L)
        Xp = M * (pre - mu_p) / (sd_p + EPS)
        Xr = M * (res - mu_r) / (sd_r + EPS)
        C = C + (Xp.T @ Xr) / L
        sig_pre.append(sd_p)
        sig_res.append(sd_r)
    C = C / B
    corr = torch.clamp(C.abs() - TAU_CORR, min=0.0).pow(2).sum() / (d * d_res)
    sbar_pre = torch.stack(sig_pre).mean()
    sbar_res = torch.stack(sig_res).mean()
    var = torch.clamp(1.0 - sbar_pre, min=0.0) + 0.5 * torch.clamp(1.0 - sbar_res, min=0.0)
    return corr + LAMBDA_VAR * var, corr, var


def sir(leaves, layer, d):
    Z = pool(leaves, layer, "mean")[:, :d]
    B = Z.shape[0]
    mu = Z.mean(0)
    v = (Z - mu).pow(2).mean(0)
    vbar = v.mean()
    cv = (v - vbar).pow(2).mean().sqrt() / (vbar + EPS)
    Zh = Z / Z.norm(dim=1, keepdim=True)
    S = Zh @ Zh.T
    K = torch.exp(-2.0 * UNIF_T * (1.0 - S))
    off = (K.sum() - torch.diagonal(K).sum()) / (B * (B - 1))
    unif = torch.log(off + EPS)
    return 0.5 * (cv + unif), cv, unif


def mic(leaves, dims):
    scr_sum = torch.zeros(())
    sir_sum = torch.zeros(())
    tabs = {k: torch.zeros(len(MIC_LAYERS), 3) for k in ("corr", "var", "scr")}
    tabs.update({k: torch.zeros(len(MIC_LAYERS), 4) for k in ("cv", "unif", "sir")})
    for li, layer in enumerate(MIC_LAYERS):
        for di, d in enumerate(DIMS):
            if d not in dims:
                continue
            if d < FULL_D:
                s, c, v = scr(leaves, layer, d)
                scr_sum = scr_sum + s
                tabs["corr"][li, di] = c.detach()
                tabs["var"][li, di] = v.detach()
                tabs["scr"][li, di] = s.detach()
            r, cv, un = sir(leaves, layer, d)
            sir_sum = sir_sum + r
            tabs["cv"][li, di] = cv.detach()
            tabs["unif"][li, di] = un.detach()
            tabs["sir"][li, di] = r.detach()
    norm = len(MIC_LAYERS) * len(dims)
    return scr_sum / norm, sir_sum / norm, tabs


# ----------------------------------------------------------------------------

def main():
    inp = load_inputs()
    out = {}

    def put(name, t):
        assert name not in out, name
        out[name] = t.detach().clone().contiguous()

    H_NAMES = ["h1", "h2", "h3"]
    P_NAMES = [f"p{d}" for d in DIMS]
    PHI_NAMES = [f"phi{d}_{j}" for d in (4, 8, 16) for j in range(4)]

    # ---- SIA -------------------------------------------------------------
    sia_cfgs = {
        None: {},
        "incl_cls": {"include_cls": True},
        "kl_teacher_first": {"kl_student_first": False},
        "no_detach": {"detach": False},
        "m_padded": {"m_mode": "padded"},
        "m_candidates": {"m_mode": "candidates"},
        "no_full_dim": {"dims": [4, 8, 16]},
    }
    for v, cfg in sia_cfgs.items():
        pre = "sia" if v is None else f"sia_alt_{v}"
        lv = fresh_leaves(inp)
        a, c, atab, ctab, kmat = sia(lv, **cfg)
        total = a + c
        put(pre, total)
        put(f"{pre}_att", a)
        put(f"{pre}_cka", c)
        put(f"{pre}_att_per_layer_dim", atab)
        put(f"{pre}_cka_per_layer_dim", ctab)
        put(f"{pre}_k", kmat)
        for n, g in grads(total, lv, H_NAMES + P_NAMES).items():
            put(f"grad_{pre}_wrt_{n}", g)
        if v is None:
            for n, g in grads(a, lv, H_NAMES + P_NAMES).items():
                put(f"grad_sia_att_wrt_{n}", g)
            for n, g in grads(c, lv, H_NAMES).items():
                put(f"grad_sia_cka_wrt_{n}", g)
            sia_primary = total.detach()

    # ---- PIC -------------------------------------------------------------
    pic_cfgs = {
        None: {},
        "mean_pool": {"pooling": "mean"},
        "stopgrad": {"stopgrad": True},
        "mean_pool_stopgrad": {"pooling": "mean", "stopgrad": True},
    }
    for v, cfg in pic_cfgs.items():
        pre = "pic" if v is None else f"pic_alt_{v}"
        lv = fresh_leaves(inp)
        total, steps = pic(lv, **cfg)
        put(pre, total)
        put(f"{pre}_per_step", steps)
        for n, g in grads(total, lv, H_NAMES + PHI_NAMES).items():
            put(f"grad_{pre}_wrt_{n}", g)
        if v is None:
            pic_primary = total.detach()
    put("mipic_sia_plus_pic", sia_primary + pic_primary)

    # ---- MIC -------------------------------------------------------------
    lv = fresh_leaves(inp)
    s, r, tabs = mic(lv, DIMS)
    align = s + r
    put("mic_align", align)
    put("mic_scr", s)
    put("mic_sir", r)
    put("mic_corr_per_layer_dim", tabs["corr"])
    put("mic_var_per_layer_dim", tabs["var"])
    put("mic_scr_per_layer_dim", tabs["scr"])
    put("mic_cv_per_layer_dim", tabs["cv"])
    put("mic_unif_per_layer_dim", tabs["unif"])
    put("mic_sir_per_layer_dim", tabs["sir"])
    for term, val in (("mic_align", align), ("mic_scr", s), ("mic_sir", r)):
        for n, g in grads(val, lv, H_NAMES).items():
            put(f"grad_{term}_wrt_{n}", g)
    lv = fresh_leaves(inp)
    s2, r2, _ = mic(lv, [4, 8, 16])
    put("mic_alt_trunc_dims_only_align", s2 + r2)
    for n, g in grads(s2 + r2, lv, H_NAMES).items():
        put(f"grad_mic_alt_trunc_dims_only_align_wrt_{n}", g)
    global EPS
    saved_eps, EPS = EPS, 0.0
    lv = fresh_leaves(inp)
    s3, r3, _ = mic(lv, DIMS)
    EPS = saved_eps
    put("mic_alt_eps0_align", s3 + r3)
    for n, g in grads(s3 + r3, lv, H_NAMES).items():
        put(f"grad_mic_alt_eps0_align_wrt_{n}", g)

    # every key must be documented in the module docstring
    doc = __doc__
    for k in out:
        base = k
        ok = base in doc
        if not ok:
            import re
            generic = re.sub(r"sia_alt_[a-z_]+?(?=(_att|_cka|_k$|$|_wrt))", "sia_alt_<v>", k)
            generic = re.sub(r"pic_alt_[a-z_]+?(?=(_per_step|$|_wrt))", "pic_alt_<v>", generic)
            generic = re.sub(r"h[123]$", "h{1,2,3}", generic)
            generic = re.sub(r"p(4|8|16|32)$", "p{4,8,16,32}", generic)
            generic = re.sub(r"phi(4|8|16)_[0-3]$", "phi{4,8,16}_{0,1,2,3}", generic)
            ok = generic in doc or generic.replace("_{0,1,2,3}", "_{0..3}") in doc
        assert ok, f"undocumented output key {k}"

    for k, t in out.items():
        if t.dtype != torch.int64:
            out[k] = t.to(torch.float64)
    os.makedirs(os.path.dirname(OUT_PATH), exist_ok=True)
    save_file(out, OUT_PATH)
    if "-v" in sys.argv:
        for k in sorted(out):
            t = out[k]
            if t.numel() <= 12:
                print(k, tuple(t.shape), t.flatten().tolist())
            else:
                print(k, tuple(t.shape), "norm", float(t.double().norm()))
    print(f"wrote {len(out)} tensors to {OUT_PATH}")


if __name__ == "__main__":
    main()
