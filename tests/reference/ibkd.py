"""Reference values for Nest's IBKD terms (run once; the output is committed).

    /path/to/venv/bin/python tests/reference/ibkd.py   # from the repository root

Writes tests/fixtures/objectives/ibkd.safetensors: fixed float64 inputs and, computed here with PyTorch,
- the Gram matrices of the authors' kernels (Alibaba-NLP/IBKD, simcse/models_unsup.py): RBF
  exp(-gamma ||x - y||^2), IMQ 1 / sqrt(||x - y||^2 + gamma), linear = cosine, gamma = 0.5;
- HSIC as eq. 6 writes it, tr(K_X H K_S H) / n^2 with the explicit centring matrix H, per kernel;
  and with Nest's options: the median-heuristic bandwidth and rows normalised before the kernel;
- InfoNCE through W (eq. 5 with the authors' cosine / tau, tau = 0.1) and the MSE baseline, W a
  Linear(12 -> 24) with bias.
"""
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
torch.set_default_dtype(torch.float64)


def sq(z):
    zz = z @ z.T
    n = torch.diag(zz)
    return -2 * zz + n[:, None] + n[None, :]


def gram(z, kernel, gamma):
    if kernel == "rbf":
        return torch.exp(-gamma * sq(z))
    if kernel == "imq":
        return 1.0 / torch.sqrt(sq(z) + gamma)
    u = z / z.norm(dim=1, keepdim=True)
    return u @ u.T


def side_gram(z, kernel, bandwidth, normalize, gamma=0.5):
    """Nest's options: rows L2-normalised or not; gamma fixed or by the median heuristic
    (m = median squared distance between distinct rows, numpy's median; RBF 1 / (2 m), IMQ m)."""
    if normalize:
        z = z / z.norm(dim=1, keepdim=True)
    if bandwidth == "median":
        i, j = torch.triu_indices(z.shape[0], z.shape[0], offset=1)
        m = torch.quantile(sq(z)[i, j], 0.5).item()
        gamma = 1 / (2 * m) if kernel == "rbf" else m
    return gram(z, kernel, gamma)


def hsic(kx, ks):
    n = kx.shape[0]
    H = torch.eye(n) - torch.ones(n, n) / n
    return torch.trace(kx @ H @ ks @ H) / n**2


def main():
    g = torch.Generator().manual_seed(99)
    t = {"x": torch.randn(8, 16, generator=g) * 0.3, "s": torch.randn(8, 12, generator=g) * 0.3,
         "w": torch.randn(24, 12, generator=g) / 12**0.5, "b": torch.randn(24, generator=g) * 0.1,
         "teacher": torch.randn(8, 24, generator=g)}
    for k in ["rbf", "imq", "linear"]:
        kx, ks = gram(t["x"], k, 0.5), gram(t["s"], k, 0.5)
        t[f"gram_{k}"] = kx
        t[f"hsic_{k}"] = hsic(kx, ks).reshape(1)
    for k, bw, norm in [("rbf", "median", False), ("rbf", "fixed", True), ("rbf", "median", True),
                        ("imq", "median", False)]:
        kx, ks = side_gram(t["x"], k, bw, norm), side_gram(t["s"], k, bw, norm)
        t[f"hsic_{k}_{bw}{'_norm' if norm else ''}"] = hsic(kx, ks).reshape(1)
    mapped = F.linear(t["s"], t["w"], t["b"])
    logits = F.normalize(mapped, dim=-1) @ F.normalize(t["teacher"], dim=-1).T / 0.1
    t["infonce"] = F.cross_entropy(logits, torch.arange(8)).reshape(1)
    t["mse"] = ((mapped - t["teacher"]) ** 2).mean().reshape(1)
    out = os.path.join(ROOT, "tests", "fixtures", "objectives", "ibkd.safetensors")
    save_file({k: v.contiguous() for k, v in t.items()}, out)
    print(f"wrote {out}")
    for k in sorted(t):
        if t[k].numel() == 1:
            print(f"  {k} = {t[k].item():.10f}")


if __name__ == "__main__":
    main()
