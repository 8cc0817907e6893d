//! Inner loops. Each entry point uses whichever of `simsimd` (runtime dispatch to AVX2 /
//! AVX-512 / NEON, one call per row) and the [`plain`] loops was faster in
//! `nest bench search --kernels` on the 2-core x86-64 CI machine (ns per row, warm maps, 102,868
//! rows; BENCHMARKS.md): float32 dot 12 vs 29 (plain) at 64 dims, 28 vs 49 at 128, 167 vs 118
//! (simsimd) at 384; int8 dot simsimd at every dim (48 vs 105 at 384); Hamming plain at every
//! width (3.5 vs 9.4 at 64 bits, 9.6 vs 9.8 at 384). simsimd's per-call dispatch dominates short
//! rows. The plain loops are also the references the tests compare against.

use simsimd::{BinarySimilarity, SpatialSimilarity};

/// Rows at least this long go to simsimd's f32 dot; shorter ones to the plain loop.
pub const SIMSIMD_F32_MIN: usize = 256;

/// `a . b` in f32.
#[inline]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    if a.len() < SIMSIMD_F32_MIN {
        return plain::dot_f32(a, b);
    }
    f32::dot(a, b).map_or_else(|| plain::dot_f32(a, b), |d| d as f32)
}

/// `a . b` over i8 codes, exact in integer arithmetic.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    i8::dot(a, b).map_or_else(|| plain::dot_i8(a, b), |d| d.round() as i32)
}

/// Number of differing bits (the plain loop: faster than simsimd's call at every width here).
#[inline]
pub fn hamming(a: &[u8], b: &[u8]) -> u32 {
    plain::hamming(a, b)
}

/// Hamming distances of `q` to each `q.len()`-byte row of `rows`, into `out` (one per row).
/// Uses the CPU's `popcnt` instruction when it has one (checked at run time; the baseline
/// x86-64 target lacks it), else the plain loop.
pub fn hamming_many(q: &[u8], rows: &[u8], out: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        #[allow(unsafe_code)]
        // SAFETY: the CPU supports popcnt (checked just above), the only feature enabled.
        unsafe {
            hamming_many_popcnt(q, rows, out)
        };
        return;
    }
    hamming_many_plain(q, rows, out);
}

#[inline(always)]
fn hamming_many_plain(q: &[u8], rows: &[u8], out: &mut [u16]) {
    let w = q.len().max(1);
    for (o, r) in out.iter_mut().zip(rows.chunks_exact(w)) {
        *o = plain::hamming(q, r) as u16;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn hamming_many_popcnt(q: &[u8], rows: &[u8], out: &mut [u16]) {
    hamming_many_plain(q, rows, out)
}

/// simsimd's Hamming distance, kept for `nest bench search --kernels`.
#[inline]
pub fn hamming_simsimd(a: &[u8], b: &[u8]) -> u32 {
    u8::hamming(a, b).map_or_else(|| plain::hamming(a, b), |d| d.round() as u32)
}

/// simsimd's f32 dot at any length, kept for `nest bench search --kernels`.
#[inline]
pub fn dot_f32_simsimd(a: &[f32], b: &[f32]) -> f32 {
    f32::dot(a, b).map_or_else(|| plain::dot_f32(a, b), |d| d as f32)
}

/// Scalar loops written so the compiler can vectorise them (for the baseline x86-64 target:
/// SSE2 only, no `popcnt`).
pub mod plain {
    #[inline]
    pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        let mut acc = [0f32; 8];
        let mut ca = a.chunks_exact(8);
        let mut cb = b.chunks_exact(8);
        for (x, y) in (&mut ca).zip(&mut cb) {
            for k in 0..8 {
                acc[k] += x[k] * y[k];
            }
        }
        let tail: f32 = ca
            .remainder()
            .iter()
            .zip(cb.remainder())
            .map(|(x, y)| x * y)
            .sum();
        acc.iter().sum::<f32>() + tail
    }

    #[inline]
    pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
        a.iter().zip(b).map(|(&x, &y)| x as i32 * y as i32).sum()
    }

    #[inline]
    pub fn hamming(a: &[u8], b: &[u8]) -> u32 {
        let mut ca = a.chunks_exact(8);
        let mut cb = b.chunks_exact(8);
        let mut d = 0u32;
        for (x, y) in (&mut ca).zip(&mut cb) {
            let x = u64::from_le_bytes(x.try_into().unwrap_or([0; 8]));
            let y = u64::from_le_bytes(y.try_into().unwrap_or([0; 8]));
            d += (x ^ y).count_ones();
        }
        d + ca
            .remainder()
            .iter()
            .zip(cb.remainder())
            .map(|(x, y)| (x ^ y).count_ones())
            .sum::<u32>()
    }
}
