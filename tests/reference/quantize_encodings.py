"""Reference values for the server's `encoding_format`s (run once; the output is committed).

    nice -n 19 /work/venv/bin/python tests/reference/quantize_encodings.py
    # writes tests/fixtures/quantize_encodings.json (deterministic: same bytes every run)

What it computes, per fixed vector and per truncation dim (Nest truncates, then L2-normalises):
- `normalized`: the first `dim` coordinates re-normalised exactly as
  `nest_core::vector::prefix_normalized` (crates/nest-core/src/vector.rs:10-23) does it, in float32:
  the norm is a *sequential* float32 sum of x*x, sqrt, clamped below at 1e-12, then each x / norm.
  An all-zero prefix stays zero (a -0.0 stays -0.0).
- `base64`: base64 of the little-endian float32 bytes of `normalized` (OpenAI's and Cohere's
  `base64`; vLLM's with its default embed_dtype=float32 and endianness "little").
- `nest_int8` / `nest_int8_scale` / `nest_uint8`: `nest_core::vector::quantize_int8`
  (vector.rs:30-41): s = max|x| / 127 in float32, codes = (x / s) in float32 rounded half away
  from zero (Rust f32::round), clamped to -127..=127; s = 0 and all codes 0 for an all-zero row.
  nest-serve's uint8 is code + 128 with the same scale (crates/nest-serve/src/encoding.rs:17,188).
  `nest_int8_near_half`: positions whose x/s lies within 1e-4 of a .5 boundary, where a tensor
  twin of the quantiser (other float rounding) may legitimately differ by one code.
- `ubinary` = numpy.packbits(x > 0) (most significant bit first, last byte zero-padded) and
  `binary` = ubinary - 128 as int8. The script CALLS sentence_transformers.quantization's
  quantize_embeddings(precision="ubinary"/"binary") on the same rows and asserts equality.
  Nest's pack_bits (crates/nest-index/src/level.rs:129-137) sets bit `0x80 >> (j % 8)` of byte
  j / 8 when x > 0.0, over ceil(dim / 8) zeroed bytes: the SAME bit order, padding and sign rule
  as numpy.packbits(x > 0) (so 0.0 and -0.0 both give a 0 bit). Only one order is recorded.
- `vllm_cohere_ubinary_ge0`: what vLLM's Cohere-compatible /v2/embed packs (`1 if value >= 0`,
  vllm/entrypoints/pooling/embed/cohere_protocol.py, dims that are multiples of 8 only): it
  differs from the above exactly where a coordinate is 0.0 or -0.0. Documentation only.
- `st_int8` / `st_uint8` (+ `ranges`): sentence-transformers' own per-DIMENSION calibrated
  scalar quantisation (util/quantization.py:543-556): starts = min, steps = (max - min) / 255
  per dimension, q = clip(floor((x - starts) / steps), 0, 255), int8 = q - 128. Once with the
  ranges taken from the 6 rows themselves (no calibration set), once with a fixed seeded
  calibration set of 64 vectors. Unlike Nest's, a row's codes depend on the other rows.
- `scores`: query = row 0, documents = rows 1..5, per dim: float cosine (float64 dot of the
  normalised float32 rows), Nest's int8 estimate dot(codes_q, codes_d) * s_q * s_d, and binary
  `equal_bits` = dim - popcount(ubinary_q XOR ubinary_d) (padding bits are 0 in both, so they
  never count as different; Nest's funnel scores 1 - 2 * hamming / dim); each with its ranking
  (best first, ties by the lower row).

Tolerances for the Rust side: `normalized` is bit-exact for `prefix_normalized` (same float32
operations in the same order); a tensor path (libtorch F.normalize) may differ by ~1 ulp, so
compare floats with 1e-6. Codes, bits and base64 are exact, except int8 codes listed in
`nest_int8_near_half` for a tensor path. The dim-16 case is built so that x / s lands exactly on
k + 0.5 (norm exactly 1, s exactly 2^-7): it checks the half-away-from-zero rule (2.5 -> 3 and
-0.5 -> -1 in Nest, where numpy's np.round gives 2 and -0).
"""
import base64
import json
import logging
import os
import re

import numpy as np
from sentence_transformers.util.quantization import quantize_embeddings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "quantize_encodings.json")
F32 = np.float32


def compact_json(obj):
    """indent=1, but every list of numbers or strings on one line (small diffs, small files)."""
    text = json.dumps(obj, indent=1)
    out = re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    assert json.loads(out) == obj
    return out


def vectors20():
    rng = np.random.default_rng(20250607)
    x = rng.standard_normal((6, 20)).astype(F32)
    # exact zeros and negative zeros among the components
    x[0, 3], x[0, 9], x[0, 16] = 0.0, -0.0, 0.0
    x[1, 0], x[1, 12] = -0.0, 0.0
    x[2, 7], x[2, 8] = 0.0, -0.0
    x[3, 19] = -0.0
    # row 5: an all-zero prefix up to dim 8 (zeros and negative zeros), values after
    x[5, :8] = np.array([0.0, -0.0, 0.0, 0.0, -0.0, 0.0, -0.0, 0.0], dtype=F32)
    return x


def vector16():
    # 256 * v = (254, -27, 16, 5, -3, -1, 0, -0, 0, ...): sum of squares 64516 + 1020 = 65536, so
    # the norm is exactly 1 and normalising changes nothing; max|x| = 254/256 so s = 2^-7 exactly
    # and x / s = 256 * v / 2 is exact: 127, -13.5, 8, 2.5, -1.5, -0.5 (halves on purpose).
    a = [254, -27, 16, 5, -3, -1, 0.0, -0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    v = np.array([t / 256 for t in a], dtype=F32)
    assert float(np.sum(v.astype(np.float64) ** 2)) == 1.0
    return v[None, :]


def prefix_normalized(row, dim):
    """nest_core::vector::prefix_normalized, float32 op for op (sequential sum)."""
    p = row[:dim].astype(F32).copy()
    acc = F32(-0.0)  # Rust's f32 Sum starts at -0.0 (1.81+); +0.0 gives the same for x*x >= 0
    for x in p:
        acc = F32(acc + F32(x * x))
    norm = max(F32(np.sqrt(acc)), F32(1e-12))
    return (p / F32(norm)).astype(F32)


def round_half_away(q):
    q = q.astype(np.float64)  # exact: |q| <= ~128 with a 24-bit mantissa
    t = np.trunc(q)
    return np.where(np.abs(q - t) >= 0.5, t + np.sign(q), t)


def nest_int8(x):
    """nest_core::vector::quantize_int8."""
    m = F32(0.0)
    for v in x:
        m = max(m, F32(abs(v)))
    if m == 0.0 or not np.isfinite(m):
        return np.zeros(len(x), dtype=np.int64), 0.0, []
    s = F32(m / F32(127.0))
    q = (x.astype(F32) / s).astype(F32)
    codes = np.clip(round_half_away(q), -127, 127).astype(np.int64)
    frac = np.abs(q.astype(np.float64) - np.trunc(q.astype(np.float64)))
    near = [int(i) for i in np.nonzero(np.abs(frac - 0.5) < 1e-4)[0]]
    return codes, float(s), near


def packbits(x):
    return np.packbits(x > 0, axis=-1)


def ge0_bits(x):
    # vLLM cohere_protocol._pack_binary_embeddings: bit = 1 if value >= 0 (Python float compare)
    assert len(x) % 8 == 0
    out = []
    for i in range(0, len(x), 8):
        b = 0
        for j, v in enumerate(x[i:i + 8]):
            b += (1 if float(v) >= 0 else 0) << (7 - j)
        out.append(b)
    return out


def f32list(a):
    # float(np.float32) is exact in float64; -0.0 survives as -0.0 in JSON
    return [float(v) for v in a]


def st_scalar(rows, calib, precision):
    if calib is None:
        ranges = np.vstack((rows.min(axis=0), rows.max(axis=0)))
        out = quantize_embeddings(rows, precision=precision)
    else:
        ranges = np.vstack((calib.min(axis=0), calib.max(axis=0)))
        out = quantize_embeddings(rows, precision=precision, calibration_embeddings=calib)
    # independent re-computation of ST's formula (quantization.py:547-556)
    r = ranges.astype(F32)
    steps = (r[1] - r[0]) / F32(255)
    steps = np.where(steps == 0, 1, steps)
    q = np.clip(np.floor((rows - r[0]) / steps), 0, 255)
    mine = q.astype(np.uint8) if precision == "uint8" else (q - 128).astype(np.int8)
    assert np.array_equal(out, mine), (precision, out, mine)
    return out, ranges


def case(rows, dims, calib_seed, with_scores):
    result = []
    rng = np.random.default_rng(calib_seed)
    calib_full = rng.standard_normal((64, rows.shape[1])).astype(F32)
    for dim in dims:
        norm = np.stack([prefix_normalized(r, dim) for r in rows])
        calib = np.stack([prefix_normalized(r, dim) for r in calib_full])
        ub = packbits(norm)
        st_ub = quantize_embeddings(norm, precision="ubinary")
        st_b = quantize_embeddings(norm, precision="binary")
        assert st_ub.dtype == np.uint8 and st_b.dtype == np.int8
        assert np.array_equal(st_ub, ub)
        assert np.array_equal(st_b.astype(np.int64), ub.astype(np.int64) - 128)
        assert ub.shape[1] == (dim + 7) // 8
        entry = {"dim": dim, "rows": []}
        ints = []
        for r in range(len(rows)):
            codes, s, near = nest_int8(norm[r])
            ints.append((codes, s))
            row = {
                "normalized": f32list(norm[r]),
                "base64": base64.b64encode(norm[r].astype("<f4").tobytes()).decode("ascii"),
                "nest_int8": codes.tolist(),
                "nest_int8_scale": s,
                "nest_uint8": (codes + 128).tolist(),
                "nest_int8_near_half": near,
                "ubinary": ub[r].astype(int).tolist(),
                "binary": (ub[r].astype(int) - 128).tolist(),
            }
            if dim % 8 == 0:
                row["vllm_cohere_ubinary_ge0"] = ge0_bits(norm[r])
            entry["rows"].append(row)
        if len(rows) > 1:
            st = {}
            for prec in ("int8", "uint8"):
                out, ranges = st_scalar(norm, None, prec)
                st[f"st_{prec}_self"] = out.astype(int).tolist()
                st["ranges_self"] = [f32list(ranges[0]), f32list(ranges[1])]
                out, ranges = st_scalar(norm, calib, prec)
                st[f"st_{prec}_calibrated"] = out.astype(int).tolist()
                st["ranges_calibrated"] = [f32list(ranges[0]), f32list(ranges[1])]
            entry["sentence_transformers"] = st
        else:
            st = {}
            for prec in ("int8", "uint8"):
                out, ranges = st_scalar(norm, calib, prec)
                st[f"st_{prec}_calibrated"] = out.astype(int).tolist()
                st["ranges_calibrated"] = [f32list(ranges[0]), f32list(ranges[1])]
            entry["sentence_transformers"] = st
        if with_scores:
            q = norm[0].astype(np.float64)
            docs = list(range(1, len(rows)))
            cos = [float(q @ norm[d].astype(np.float64)) for d in docs]
            cq, sq = ints[0]
            i8 = [float(int(cq @ ints[d][0]) * sq * ints[d][1]) for d in docs]
            eq = []
            for d in docs:
                x = np.bitwise_xor(ub[0], ub[d])
                eq.append(int(dim - np.unpackbits(x).sum()))

            def rank(v):
                order = np.lexsort((np.array(docs), -np.array(v, dtype=np.float64)))
                return [docs[i] for i in order]

            entry["scores"] = {
                "query": 0,
                "docs": docs,
                "cosine": cos,
                "cosine_ranking": rank(cos),
                "int8_dot": [int(cq @ ints[d][0]) for d in docs],
                "int8_estimate": i8,
                "int8_ranking": rank(i8),
                "binary_equal_bits": eq,
                "binary_hamming": [dim - e for e in eq],
                "binary_ranking": rank(eq),
            }
        result.append(entry)
    return result


def main():
    logging.disable(logging.WARNING)  # ST warns that 6 rows are few for calibration; intended
    x20 = vectors20()
    x16 = vector16()
    fixture = {
        "about": "Nest encoding_format reference; generated by tests/reference/quantize_encodings.py",
        "conventions": {
            "normalized": "prefix x[:dim] / max(sqrt(sequential f32 sum x*x), 1e-12), float32",
            "base64": "base64(little-endian float32 bytes of normalized)",
            "nest_int8": "round_half_away_from_zero(x / s) clamped to [-127, 127], s = max|x|/127 (f32); all-zero row: s = 0, codes 0",
            "nest_uint8": "nest_int8 + 128, same scale",
            "ubinary": "numpy.packbits(x > 0): MSB first, last byte zero-padded; == sentence-transformers 'ubinary' == Nest pack_bits",
            "binary": "ubinary - 128 as int8; == sentence-transformers 'binary'",
            "vllm_cohere_ubinary_ge0": "vLLM /v2/embed packing (bit = value >= 0; dims % 8 == 0 only): differs on 0.0 / -0.0",
            "st_int8": "sentence-transformers: per-dimension ranges [min; max] of the calibration rows (or of the batch itself), steps=(max-min)/255, q=clip(floor((x-min)/steps),0,255), int8=q-128, uint8=q",
            "scores": "query row 0 vs rows 1..; int8_estimate = dot(codes) * s_q * s_d; binary_equal_bits = dim - hamming; rankings best first, ties by lower row",
        },
        "dim20": {"inputs": [f32list(r) for r in x20], "cases": case(x20, [20, 13, 8], 11, True)},
        "dim16": {"inputs": [f32list(r) for r in x16], "cases": case(x16, [16, 8, 5], 12, False)},
    }
    # the crafted halves: Nest rounds away from zero where numpy's np.round would round to even
    c16 = fixture["dim16"]["cases"][0]["rows"][0]
    assert c16["nest_int8_scale"] == 2 ** -7 and c16["nest_int8"][:6] == [127, -14, 8, 3, -2, -1], c16["nest_int8"]
    assert np.round(np.array([-13.5, 2.5, -1.5, -0.5])).tolist() == [-14.0, 2.0, -2.0, -0.0]  # numpy: to even
    # the all-zero prefix (row 5, dim 8): zero vector, zero scale, zero codes, no bits
    z = fixture["dim20"]["cases"][2]["rows"][5]
    assert z["nest_int8_scale"] == 0.0 and not any(z["nest_int8"]) and z["ubinary"] == [0]
    text = compact_json(fixture)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text + "\n")
    print(f"wrote {os.path.relpath(OUT, ROOT)} ({len(text)} bytes); all sentence-transformers checks passed")


if __name__ == "__main__":
    main()
