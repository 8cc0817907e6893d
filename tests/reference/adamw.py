"""Reference trajectory for Nest's AdamW (run once; the output is committed).

    python tests/reference/adamw.py   # writes tests/fixtures/losses/adamw.safetensors

torch.optim.AdamW (betas 0.9/0.999, eps 1e-8) on two float32 tensors, one with weight decay 0.01
and one without, for 6 steps with the gradients and learning rates stored here (the first lr is 0,
as at the start of a warm-up).
"""
import os

import torch
from safetensors.torch import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
g = torch.Generator().manual_seed(7)
w = torch.randn(50, 8, generator=g)
b = torch.randn(8, generator=g)
pw, pb = w.clone().requires_grad_(), b.clone().requires_grad_()
opt = torch.optim.AdamW([{"params": [pw], "weight_decay": 0.01}, {"params": [pb], "weight_decay": 0.0}], lr=1e-3)
lrs = [0.0, 1e-3, 2e-3, 2e-3, 1e-3, 5e-4]
out = {"w0": w, "b0": b, "lrs": torch.tensor(lrs, dtype=torch.float64)}
for k, lr in enumerate(lrs):
    gw = torch.randn(50, 8, generator=g) * (k + 1)
    gb = torch.randn(8, generator=g)
    out[f"gw{k}"], out[f"gb{k}"] = gw, gb
    for group in opt.param_groups:
        group["lr"] = lr
    pw.grad, pb.grad = gw.clone(), gb.clone()
    opt.step()
    out[f"w{k + 1}"], out[f"b{k + 1}"] = pw.detach().clone(), pb.detach().clone()
save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(ROOT, "tests", "fixtures", "losses", "adamw.safetensors"))
print("final |w|", float(pw.norm()))
