//! Inner loops. The SIMD versions call `simsimd` (runtime dispatch to AVX2 / AVX-512 / NEON);
//! the [`plain`] versions are the references the tests compare against and the benchmark
//! measures beside them (`nest bench search --kernels`).

use simsimd::{BinarySimilarity, SpatialSimilarity};

/// `a . b` in f32 (accumulated by simsimd in f64 where it can).
#[inline]
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    f32::dot(a, b).map_or_else(|| plain::dot_f32(a, b), |d| d as f32)
}

/// `a . b` over i8 codes, exact in integer arithmetic.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    i8::dot(a, b).map_or_else(|| plain::dot_i8(a, b), |d| d.round() as i32)
}

/// Number of differing bits.
#[inline]
pub fn hamming(a: &[u8], b: &[u8]) -> u32 {
    u8::hamming(a, b).map_or_else(|| plain::hamming(a, b), |d| d.round() as u32)
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
