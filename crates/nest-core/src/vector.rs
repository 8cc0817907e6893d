//! L2 normalisation of plain `f32` rows: the one definition for code without tensors (the index,
//! pgvector queries). Tensor code uses `nest_model::pooling::l2_normalize`, which divides by the
//! same clamped norm ([`NORM_EPS`]), so both give the same vectors up to float rounding.

/// The smallest norm divided by, as sentence-transformers' `Normalize` (`F.normalize`, eps 1e-12):
/// an all-zero row stays all zeros.
pub const NORM_EPS: f32 = 1e-12;

/// Scales `v` in place to unit L2 norm (an all-zero row stays zero).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(NORM_EPS);
    for x in v {
        *x /= norm;
    }
}

/// The first `dim` coordinates of `v` (all of `v` when it is shorter), L2-normalised: the
/// Matryoshka cut of one row.
pub fn prefix_normalized(v: &[f32], dim: usize) -> Vec<f32> {
    let mut p = v[..dim.min(v.len())].to_vec();
    l2_normalize(&mut p);
    p
}

/// Nest's int8 storage: symmetric per-row quantisation, the codes `round(x / s)` (halves away
/// from zero, within -127..=127) and the scale `s = max|x| / 127` (0 for an all-zero or
/// non-finite row, whose codes are 0). A dot product of two rows is estimated as
/// `dot(codes_a, codes_b) * s_a * s_b`. What `nest index` stores and `nest eval --precision
/// int8` scores.
pub fn quantize_int8(x: &[f32]) -> (Vec<i8>, f32) {
    let m = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    if m == 0.0 || !m.is_finite() {
        return (vec![0; x.len()], 0.0);
    }
    let s = m / 127.0;
    let q = x
        .iter()
        .map(|v| (v / s).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (q, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_norm_prefix_and_zero_row() {
        let p = prefix_normalized(&[3.0, 4.0, 12.0], 2);
        assert!((p[0] - 0.6).abs() < 1e-7 && (p[1] - 0.8).abs() < 1e-7);
        assert_eq!(prefix_normalized(&[0.0, 0.0], 2), vec![0.0, 0.0]);
        assert_eq!(prefix_normalized(&[1.0], 5).len(), 1);
    }
}
