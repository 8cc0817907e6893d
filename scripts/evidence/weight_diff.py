#!/usr/bin/env python3
"""Relative difference between two models' weights: ||A - B|| / ||A|| over every float tensor of
model.safetensors, and the largest per-tensor relative difference with its name.

    python scripts/evidence/weight_diff.py MODEL_DIR_A MODEL_DIR_B     (needs torch + safetensors)
"""
import sys

import torch
from safetensors.torch import load_file

a = load_file(f"{sys.argv[1]}/model.safetensors")
b = load_file(f"{sys.argv[2]}/model.safetensors")
if a.keys() != b.keys():
    sys.exit(f"the models' tensors differ: {sorted(a.keys() ^ b.keys())[:5]}")
num = den = 0.0
worst = (0.0, "")
for k in sorted(a):
    if not a[k].is_floating_point():
        continue
    x, y = a[k].double(), b[k].double()
    d, n = (x - y).norm().item() ** 2, x.norm().item() ** 2
    num, den = num + d, den + n
    if n > 0:
        worst = max(worst, ((d / n) ** 0.5, k))
print(f"relative weight difference {(num / den) ** 0.5:.3e} (largest: {worst[1]} {worst[0]:.3e})")
