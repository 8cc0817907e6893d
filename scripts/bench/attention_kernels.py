#!/usr/bin/env python3
"""Times libtorch's fused scaled_dot_product_attention against the explicit
softmax(q k^T s + mask) v (scores and softmax in float32) on sentence-batch shapes, in bf16 and
float32: the measurement behind crates/nest-model/src/attention.rs's EXPLICIT_MAX_KEYS.

    /path/to/venv/bin/python scripts/bench/attention_kernels.py [--threads 2]

Needs torch (the same version as Nest's libtorch, 2.13.0, for figures that carry over).
Prints milliseconds per call, best of 3 rounds of 60 calls, batch 32, 12 heads.
"""
import argparse
import time

import torch


def best_ms(f, calls=60, rounds=3):
    for _ in range(5):
        f()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        best = min(best, (time.perf_counter() - t) / calls * 1e3)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch 32, 12 heads; ms per call")
    print("keys | head dim | bf16 fused | bf16 explicit | float32 fused | float32 explicit")
    for dim in (32, 64):
        for keys in (16, 24, 32, 40, 48, 56, 64, 128):
            row = []
            for kind in (torch.bfloat16, torch.float32):
                q, k, v = (torch.randn(32, 12, keys, dim).to(kind) for _ in range(3))
                mask32 = torch.zeros(32, 1, 1, keys)
                mask32[..., -max(1, keys // 8):] = -3e38  # some padded keys
                mask = mask32.clamp_min(-1e38).to(kind)

                def fused():
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

                def explicit():
                    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * dim**-0.5 + mask32
                    return torch.matmul(s.softmax(-1).to(kind), v)

                row += [best_ms(fused), best_ms(explicit)]
            print(f"{keys} | {dim} | " + " | ".join(f"{x:.3f}" for x in row), flush=True)


if __name__ == "__main__":
    main()
