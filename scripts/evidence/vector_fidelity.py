"""How far one arithmetic's vectors are from another's: mean and max of 1000 x (1 - cosine) per
prefix dim, over the rows of two `nest encode` outputs of the same inputs (numpy only).

    nest encode --layer 6 --dtype float32 --input s.txt --output f32.npy
    nest encode --layer 6 --dtype int8    --input s.txt --output int8.npy
    python3 scripts/evidence/vector_fidelity.py f32.npy int8.npy [--dims 16,32,384]

Each prefix is normalised on its own (a Matryoshka prefix is used that way), so the figure is the
cosine error a search at that dim sees.
"""
import argparse

import numpy as np


def errors(ref, other, dim):
    a, b = ref[:, :dim], other[:, :dim]
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    err = 1000.0 * (1.0 - (a * b).sum(axis=1))
    return err.mean(), err.max()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reference")
    p.add_argument("other")
    p.add_argument("--dims", default="16,32,384", help="comma-separated prefix dims")
    a = p.parse_args()
    ref, other = np.load(a.reference), np.load(a.other)
    if ref.shape != other.shape:
        raise SystemExit(f"{a.reference} is {ref.shape} but {a.other} is {other.shape}: encode the same inputs")
    for d in (int(x) for x in a.dims.split(",")):
        if d > ref.shape[1]:
            raise SystemExit(f"--dims: {d} is more than the vectors' {ref.shape[1]} dims")
        mean, worst = errors(ref, other, d)
        print(f"d={d}: 1000 x (1 - cos) mean {mean:.2f}, max {worst:.1f} over {ref.shape[0]} rows")


if __name__ == "__main__":
    main()
