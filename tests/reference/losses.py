"""Reference values for Nest's task losses (run once; the output is committed).

    python tests/reference/losses.py   # writes tests/fixtures/losses/losses.safetensors

Computed with PyTorch and sentence-transformers' own similarity functions (util.cos_sim,
util.pairwise_cos_sim, util.pairwise_angle_sim), following the forward() of
MultipleNegativesRankingLoss, MultipleNegativesSymmetricRankingLoss, CoSENTLoss and AnglELoss.
"""
import os

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from sentence_transformers import util

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "losses")


def mnrl(a, p, n, scale):
    cands = torch.cat([p, n]) if n is not None else p
    scores = util.cos_sim(a, cands) * scale
    return F.cross_entropy(scores, torch.arange(len(a)))


def mnrl_sym(a, p, n, scale):
    cands = torch.cat([p, n]) if n is not None else p
    scores = util.cos_sim(a, cands) * scale
    labels = torch.arange(len(a))
    forward = F.cross_entropy(scores, labels)
    backward = F.cross_entropy(scores[:, : len(a)].t(), labels)
    return (forward + backward) / 2


def cosent_from(scores, labels, scale):
    scores = scores * scale
    scores = scores[:, None] - scores[None, :]
    labels = labels[:, None] < labels[None, :]
    labels = labels.float()
    scores = scores - (1 - labels) * 1e12
    scores = torch.cat((torch.zeros(1), scores.view(-1)), dim=0)
    return torch.logsumexp(scores, dim=0)


def main():
    g = torch.Generator().manual_seed(123)
    B, D = 12, 32
    a = torch.randn(B, D, generator=g, dtype=torch.float64)
    p = a + 0.8 * torch.randn(B, D, generator=g, dtype=torch.float64)
    n = torch.randn(B, D, generator=g, dtype=torch.float64)
    gold = torch.round(torch.rand(B, generator=g, dtype=torch.float64) * 5, decimals=1)
    out = {"a": a, "p": p, "n": n, "gold": gold}
    for d in [8, 32]:
        aa, pp, nn = a[:, :d], p[:, :d], n[:, :d]
        out[f"mnrl_{d}"] = mnrl(aa, pp, None, 20.0).reshape(1)
        out[f"mnrl_hard_{d}"] = mnrl(aa, pp, nn, 20.0).reshape(1)
        out[f"mnrl_sym_hard_{d}"] = mnrl_sym(aa, pp, nn, 20.0).reshape(1)
        out[f"cosent_{d}"] = cosent_from(util.pairwise_cos_sim(aa, pp), gold, 20.0).reshape(1)
        out[f"angle_{d}"] = cosent_from(util.pairwise_angle_sim(aa, pp), gold, 20.0).reshape(1)
        out[f"angle_sim_{d}"] = util.pairwise_angle_sim(aa, pp)
    os.makedirs(OUT, exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(OUT, "losses.safetensors"))
    print({k: float(v[0]) for k, v in out.items() if v.numel() == 1})


if __name__ == "__main__":
    main()
