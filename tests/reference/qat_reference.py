"""Reference values for Nest's quantization-aware MRL (issue 40): run once, the output is committed.

    /path/to/venv/bin/python tests/reference/qat_reference.py   # from the repository root

Writes tests/fixtures/qat_reference.json: on fixed float32 inputs (anchors and positives, 6 x 16),
the MRL loss with MNRL (InfoNCE over in-batch negatives, scale 20, sentence-transformers'
MultipleNegativesRankingLoss) at the prefix dims 4, 8, 16 (weight 1 each), with every prefix also
scored at int8 and binary (weight 0.5 each), and its gradient with respect to the input rows.

Written from the definitions, independently of Nest's code:
- the prefix is cut and L2-normalised (F.normalize, eps 1e-12), as Nest's vectors are before storing;
- int8: symmetric per row, scale max|v| / 127, codes round(v / scale) with halves away from zero
  (Rust's f32::round; torch.round rounds halves to even, so it is written out with trunc), clamped to
  [-127, 127], dequantised (codes * scale);
- binary: +1 where v > 0, else -1 (the sign bits `nest index` stores);
- the quantised point L2-normalised, then the straight-through step y = v + (q - v).detach():
  forward value q, backward the identity from q to v.
Also written: each precision's loss summed over the dims (unweighted), for the per-term check.

Also written ("levers"): the binary term alone at weight 1 with its own scale 5 (the float and
task terms keep 20), plus the spread-out term of Zhang et al. 2017 (arXiv:1708.06320, eq. 4, the
global orthogonal regularisation: over distinct rows i != j of a column's normalised prefix,
M1 = mean(v_i . v_j), M2 = mean((v_i . v_j)^2), M1^2 + max(0, M2 - 1/d)), averaged over the two
columns, at weight 1, at every dim the binary term scores; the loss and its gradient.

Tolerance in the Rust test (crates/nest-train/src/objective/quant/tests.rs): 1e-5 relative on
the loss, 1e-5 times the largest gradient entry on every gradient entry (float32 on both sides).
"""
import json
import os

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "qat_reference.json")

SCALE = 20.0
DIMS = [4, 8, 16]
WEIGHT = 0.5


def mnrl(a, p, scale=SCALE):
    logits = F.normalize(a, dim=1) @ F.normalize(p, dim=1).T * scale
    return F.cross_entropy(logits, torch.arange(a.shape[0]))


def int8_dequantised(v):
    m = v.abs().amax(dim=1, keepdim=True)
    s = m / 127.0
    u = v / s
    t = torch.trunc(u)
    codes = t + torch.sign(u) * ((u - t).abs() >= 0.5).to(u.dtype)
    return codes.clamp(-127.0, 127.0) * s


def binary_pm1(v):
    return (v > 0).to(v.dtype) * 2.0 - 1.0


def straight_through(x, precision):
    v = F.normalize(x, dim=1, eps=1e-12)
    q = int8_dequantised(v) if precision == "int8" else binary_pm1(v)
    q = F.normalize(q, dim=1, eps=1e-12)
    return v + (q - v).detach()


def spread_out(x):
    v = F.normalize(x, dim=1, eps=1e-12)
    n, d = v.shape
    g = v @ v.T
    off = [g[i, j] for i in range(n) for j in range(n) if i != j]
    m1 = sum(off) / len(off)
    m2 = sum(c * c for c in off) / len(off)
    return m1 * m1 + torch.clamp(m2 - 1.0 / d, min=0.0)


def levers(a0, p0, binary_scale=5.0, spread=1.0):
    a = a0.clone().requires_grad_(True)
    p = p0.clone().requires_grad_(True)
    total = 0.0
    for d in DIMS:
        ad, pd = a[:, :d], p[:, :d]
        total = total + mnrl(ad, pd)
        total = total + mnrl(straight_through(ad, "binary"), straight_through(pd, "binary"), binary_scale)
        total = total + spread * (spread_out(ad) + spread_out(pd)) / 2
    total.backward()
    return {"binary_scale": binary_scale, "spread": spread, "loss": total.item(),
            "grad_anchors": a.grad.tolist(), "grad_positives": p.grad.tolist()}


def main():
    g = torch.Generator().manual_seed(40)
    a = torch.randn(6, 16, generator=g, dtype=torch.float32) * 1.5
    p = a + torch.randn(6, 16, generator=g, dtype=torch.float32) * 2.5
    a.requires_grad_(True)
    p.requires_grad_(True)
    parts = {"float32": 0.0, "int8": 0.0, "binary": 0.0}
    total = 0.0
    for d in DIMS:
        ad, pd = a[:, :d], p[:, :d]
        f = mnrl(ad, pd)
        total = total + f
        parts["float32"] += f.item()
        for prec in ("int8", "binary"):
            q = mnrl(straight_through(ad, prec), straight_through(pd, prec))
            total = total + WEIGHT * q
            parts[prec] += q.item()
    total.backward()
    out = {
        "scale": SCALE,
        "dims": DIMS,
        "weight": WEIGHT,
        "anchors": a.detach().tolist(),
        "positives": p.detach().tolist(),
        "loss": total.item(),
        "loss_by_precision": parts,
        "grad_anchors": a.grad.tolist(),
        "grad_positives": p.grad.tolist(),
        "torch": torch.__version__,
    }
    out["levers"] = levers(a.detach(), p.detach())
    with open(OUT, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"wrote {OUT}: loss {total.item():.6f}, by precision {parts}")


if __name__ == "__main__":
    main()
