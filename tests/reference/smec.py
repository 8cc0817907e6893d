"""Reference values for nest-compress's losses (run once; the output is committed).

    python tests/reference/smec.py   # writes tests/fixtures/compress/smec.safetensors

Independent computations in PyTorch (float64) of:
- SMEC eq. 8 (rank loss) written literally as the triple sum over (i, j, k) with the indicator
  y_ij > y_ik, divided by the number of counted triples (Nest's mean), with s = scale * cos;
- SMEC eq. 7 (similarity preservation) as the mean |cos(e_i, e_j) - cos(c_i, c_j)| over given pairs;
- Matryoshka-Adaptor's all-pairs term over i != j;
- WARE (eq. 10) by literally deleting each dim and recomputing the cosine;
- PCA with scikit-learn (components and mean), for the PCA adaptor.
"""
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from sklearn.decomposition import PCA

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "compress")


def rank_loss(q, d, rel, scale):
    s = F.cosine_similarity(q[:, None, :], d[None, :, :], dim=-1) * scale
    total, count = 0.0, 0
    B, C = rel.shape
    for i in range(B):
        for j in range(C):
            for k in range(C):
                if rel[i, j] > rel[i, k]:
                    total = total + (rel[i, j] - rel[i, k]) * torch.log1p(torch.exp(s[i, k] - s[i, j]))
                    count += 1
    return total / max(count, 1)


def main():
    g = torch.Generator().manual_seed(7)
    B, C, D = 5, 9, 16
    q = torch.randn(B, D, generator=g, dtype=torch.float64)
    d = torch.randn(C, D, generator=g, dtype=torch.float64)
    rel = torch.zeros(B, C, dtype=torch.float64)
    rel[0, 1] = 1; rel[0, 4] = 2; rel[1, 0] = 1; rel[2, 8] = 1; rel[3, 3] = 1; rel[3, 5] = 1; rel[4, 2] = 3
    out = {"q": q, "d": d, "rel": rel}
    for scale in (1.0, 10.0):
        out[f"rank_{int(scale)}"] = torch.tensor(rank_loss(q, d, rel, scale).item(), dtype=torch.float64)
    # eq. 7 over neighbour pairs: items x [N, D], neighbours y [N, K, D], compressed by a linear map
    N, K, d_out = 6, 3, 5
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    y = torch.randn(N, K, D, generator=g, dtype=torch.float64)
    w = torch.randn(d_out, D, generator=g, dtype=torch.float64)
    cx, cy = x @ w.T, y @ w.T
    frozen = F.cosine_similarity(x[:, None, :].expand_as(y), y, dim=-1)
    comp = F.cosine_similarity(cx[:, None, :].expand_as(cy), cy, dim=-1)
    out.update({"x": x, "y": y, "w": w, "gap": (frozen - comp).abs().mean()})
    sx = F.cosine_similarity(x[:, None, :], x[None, :, :], dim=-1)
    scx = F.cosine_similarity(cx[:, None, :], cx[None, :, :], dim=-1)
    off = ~torch.eye(N, dtype=torch.bool)
    out["pairwise"] = (sx[off] - scx[off]).abs().mean()
    # WARE: delete dim i, recompute cosines
    M = 40
    a = torch.randn(M, D, generator=g, dtype=torch.float64)
    b = a + torch.randn(M, D, generator=g, dtype=torch.float64)
    base = F.cosine_similarity(a, b, dim=-1)
    ware = []
    for i in range(D):
        keep = [j for j in range(D) if j != i]
        yi = F.cosine_similarity(a[:, keep], b[:, keep], dim=-1)
        ware.append(((yi - base).abs() / base.abs()).mean())
    out.update({"ware_a": a, "ware_b": b, "ware": torch.stack(ware)})
    # PCA (scikit-learn)
    X = torch.randn(200, D, generator=g, dtype=torch.float64) @ torch.randn(D, D, generator=g, dtype=torch.float64)
    p = PCA(n_components=D, svd_solver="full").fit(X.numpy())
    out.update({"pca_x": X, "pca_components": torch.from_numpy(p.components_.copy()), "pca_mean": torch.from_numpy(p.mean_.copy())})
    os.makedirs(OUT, exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(OUT, "smec.safetensors"))
    print({k: (float(v) if v.numel() == 1 else tuple(v.shape)) for k, v in out.items()})


if __name__ == "__main__":
    main()
