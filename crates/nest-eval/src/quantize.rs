//! Precision of stored vectors: float32; int8 as `nest index` stores it (symmetric per-row
//! scale, `nest_core::vector::quantize_int8`); `int8-calibrated`, sentence-transformers'
//! `quantize_embeddings` scheme (per-dimension calibration ranges; evaluation only); and binary
//! (sign bits).
//!
//! Similarities, as the stored vectors would be scored: float32 cosine; int8 the index's
//! estimate `dot(codes_a, codes_b) * s_a * s_b`; int8-calibrated the cosine of the codes
//! (integer arithmetic); binary the cosine of the ±1 vectors, which is `1 - 2 * hamming / d`,
//! i.e. the Hamming ranking.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::{Error, Result};

/// Storage precision of an embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Float32,
    /// Per-row symmetric int8: what `nest index` stores.
    Int8,
    /// sentence-transformers' per-dimension calibrated int8 (`quantize_embeddings`).
    #[serde(rename = "int8-calibrated")]
    Int8Calibrated,
    Binary,
}

impl Precision {
    pub fn parse_list(s: &str) -> Result<Vec<Precision>> {
        let mut v = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            v.push(match p {
                "float32" | "fp32" | "f32" => Precision::Float32,
                "int8" => Precision::Int8,
                "int8-calibrated" => Precision::Int8Calibrated,
                "binary" => Precision::Binary,
                // (it was read as binary and reported under that name without a word, while
                // the MTEB encoder refused it: helper trial E)
                "ubinary" => {
                    return Err(Error::Core(nest_core::Error::value(
                        "--precision",
                        "'ubinary' scores as binary does (the same sign bits, stored unsigned): \
                         give binary",
                    )))
                }
                other => {
                    return Err(Error::Core(nest_core::Error::value(
                        "--precision",
                        format!("'{other}' is not one of float32, int8, int8-calibrated, binary"),
                    )))
                }
            });
        }
        if v.is_empty() {
            return Err(Error::Core(nest_core::Error::value(
                "--precision",
                "no precision given",
            )));
        }
        v.sort();
        v.dedup();
        Ok(v)
    }

    pub fn name(&self) -> &'static str {
        match self {
            Precision::Float32 => "float32",
            Precision::Int8 => "int8",
            Precision::Int8Calibrated => "int8-calibrated",
            Precision::Binary => "binary",
        }
    }

    /// Bytes to store one vector of `dim` coordinates.
    pub fn bytes(&self, dim: usize) -> usize {
        match self {
            Precision::Float32 => 4 * dim,
            Precision::Int8 => dim + 4,
            Precision::Int8Calibrated => dim,
            Precision::Binary => dim.div_ceil(8),
        }
    }
}

/// Per-dimension `[min, max]` ranges for int8, from calibration vectors `[n, d]`.
#[derive(Debug)]
pub struct Calibration {
    pub min: Tensor,
    pub max: Tensor,
}

impl Calibration {
    pub fn from(x: &Tensor) -> Self {
        Calibration {
            min: x.amin([0i64].as_slice(), false),
            max: x.amax([0i64].as_slice(), false),
        }
    }
}

/// Quantises `x` `[n, d]` and returns the values as float32: int8 the dequantised rows
/// `codes * s` (see [`int8_rows`]); int8-calibrated the codes in -128..=127,
/// `code = clip(floor((x - min) / step), 0, 255) - 128` with `step = (max - min) / 255` (1 where
/// the range is empty), exactly as sentence-transformers 6's `quantize_embeddings`; binary ±1.
pub fn quantize(x: &Tensor, p: Precision, calib: &Calibration) -> Tensor {
    match p {
        Precision::Float32 => x.shallow_clone(),
        Precision::Int8 => {
            let (codes, scales) = int8_rows(x);
            codes * scales
        }
        Precision::Int8Calibrated => {
            let steps = (&calib.max - &calib.min) / 255.0;
            let steps = steps.where_self(&steps.ne(0.0), &steps.ones_like());
            (((x - &calib.min) / steps).floor().clamp(0.0, 255.0) - 128.0).to_kind(Kind::Float)
        }
        Precision::Binary => x.gt(0.0).to_kind(Kind::Float) * 2.0 - 1.0,
    }
}

/// `nest_core::vector::quantize_int8` on every row of `x` `[n, d]`, in tensor arithmetic:
/// codes `[n, d]` (as float32) and scales `[n, 1]`.
pub fn int8_rows(x: &Tensor) -> (Tensor, Tensor) {
    let x = x.to_kind(Kind::Float);
    let m = x.abs().amax([1i64].as_slice(), true);
    let ok = m.isfinite().logical_and(&m.gt(0.0));
    let s = (&m / 127.0).where_self(&ok, &m.zeros_like());
    let safe = s.where_self(&ok, &s.ones_like());
    let v = &x / &safe;
    // halves away from zero, as f32::round (torch.round rounds halves to even)
    let t = v.trunc();
    let half = (&v - &t).abs().eq(0.5);
    let q = (&t + v.sign())
        .where_self(&half, &v.round())
        .clamp(-127.0, 127.0);
    (q.where_self(&ok, &q.zeros_like()), s)
}

/// The vectors whose plain dot products are the similarities of precision `p` (see the module
/// docs): rows normalised, except int8, whose dequantised dot product is the index's score.
pub fn scoring_rows(x: &Tensor, p: Precision) -> Tensor {
    match p {
        Precision::Int8 => x.shallow_clone(),
        _ => normalize_rows(x),
    }
}

/// Row-wise L2-normalised copy (for cosine on quantised codes).
pub fn normalize_rows(x: &Tensor) -> Tensor {
    nest_model::pooling::l2_normalize(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_and_binary_codes() {
        let x = Tensor::from_slice(&[-1.0f32, 0.0, 0.5, 1.0]).view([2, 2]);
        let c = Calibration::from(&x);
        let q = quantize(&x, Precision::Int8Calibrated, &c);
        let v: Vec<f32> = Vec::try_from(&q.view([-1])).unwrap();
        // each dim's minimum maps to -128, its maximum to 127 (126 when float32 rounds 255 down)
        assert_eq!(&v[..2], &[-128.0, -128.0]);
        assert!(v[2] >= 126.0 && v[3] >= 126.0, "{v:?}");
        let b: Vec<f32> = Vec::try_from(&quantize(&x, Precision::Binary, &c).view([-1])).unwrap();
        assert_eq!(b, vec![-1.0, -1.0, 1.0, 1.0]);
        assert_eq!(Precision::Binary.bytes(384), 48);
        assert!(Precision::parse_list("int8,fp16").is_err());
        let e = Precision::parse_list("float32,ubinary")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'ubinary' scores as binary does") && e.contains("give binary"),
            "{e}"
        );
    }

    /// The int8 that `nest eval` scores is the int8 that `nest index` stores: the tensor
    /// quantiser gives `nest_core::vector::quantize_int8`'s codes and scales exactly (halves
    /// away from zero, zero rows), and the similarity of the dequantised rows is the index's
    /// `dot_i8(codes) * s_a * s_b` (to float32 rounding).
    #[test]
    fn int8_is_the_index_scheme() {
        let edge = [127.0f32, 2.5, -2.5, 0.5, -0.5, 1.4999, 0.0, 126.5];
        let zero = [0.0f32; 8];
        let mut rows: Vec<Vec<f32>> = vec![edge.to_vec(), zero.to_vec()];
        tch::manual_seed(3);
        let r = Tensor::randn([40, 8], (Kind::Float, tch::Device::Cpu));
        let r = normalize_rows(&r);
        for i in 0..40 {
            rows.push(Vec::try_from(&r.get(i)).unwrap());
        }
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        let x = Tensor::from_slice(&flat).view([rows.len() as i64, 8]);
        let (codes, scales) = int8_rows(&x);
        let deq = scoring_rows(
            &quantize(&x, Precision::Int8, &Calibration::from(&x)),
            Precision::Int8,
        );
        let reference: Vec<(Vec<i8>, f32)> = rows
            .iter()
            .map(|v| nest_core::vector::quantize_int8(v))
            .collect();
        for (i, (q, s)) in reference.iter().enumerate() {
            let got: Vec<f32> = Vec::try_from(&codes.get(i as i64)).unwrap();
            let want: Vec<f32> = q.iter().map(|&c| c as f32).collect();
            assert_eq!(got, want, "row {i}");
            assert_eq!(
                scales.get(i as i64).double_value(&[0]) as f32,
                *s,
                "row {i}"
            );
        }
        assert_eq!(&reference[0].0, &[127, 3, -3, 1, -1, 1, 0, 127]);
        for i in 0..rows.len() {
            for j in 0..rows.len() {
                let (qa, sa) = &reference[i];
                let (qb, sb) = &reference[j];
                let dot: i32 = qa.iter().zip(qb).map(|(&a, &b)| a as i32 * b as i32).sum();
                let index = dot as f32 * sa * sb;
                let eval = (deq.get(i as i64) * deq.get(j as i64)).sum(Kind::Float);
                let eval = eval.double_value(&[]) as f32;
                assert!(
                    (index - eval).abs() <= 1e-5 * index.abs().max(1.0),
                    "{i},{j}: {index} vs {eval}"
                );
            }
        }
    }
}
