//! Precision of stored vectors: float32, int8 (per-dimension calibration ranges) and binary
//! (sign bits), as sentence-transformers' `quantize_embeddings` defines them.
//!
//! Similarities on quantised vectors: cosine of the int8 vectors (integer arithmetic, as an int8
//! index would do), and for binary the cosine of the ±1 vectors, which is `1 - 2 * hamming / d`,
//! i.e. the Hamming ranking.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::{Error, Result};

/// Storage precision of an embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Float32,
    Int8,
    Binary,
}

impl Precision {
    pub fn parse_list(s: &str) -> Result<Vec<Precision>> {
        let mut v = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            v.push(match p {
                "float32" | "fp32" | "f32" => Precision::Float32,
                "int8" => Precision::Int8,
                "binary" | "ubinary" => Precision::Binary,
                other => {
                    return Err(Error::Core(nest_core::Error::value(
                        "--precision",
                        format!("'{other}' is not one of float32, int8, binary"),
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
            Precision::Binary => "binary",
        }
    }

    /// Bytes to store one vector of `dim` coordinates.
    pub fn bytes(&self, dim: usize) -> usize {
        match self {
            Precision::Float32 => 4 * dim,
            Precision::Int8 => dim,
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

/// Quantises `x` `[n, d]` and returns the values as float32 (int8 codes in -128..=127, or ±1).
/// int8: `code = clip(floor((x - min) / step), 0, 255) - 128` with `step = (max - min) / 255`
/// (1 where the range is empty), exactly as sentence-transformers 6's `quantize_embeddings`.
pub fn quantize(x: &Tensor, p: Precision, calib: &Calibration) -> Tensor {
    match p {
        Precision::Float32 => x.shallow_clone(),
        Precision::Int8 => {
            let steps = (&calib.max - &calib.min) / 255.0;
            let steps = steps.where_self(&steps.ne(0.0), &steps.ones_like());
            (((x - &calib.min) / steps).floor().clamp(0.0, 255.0) - 128.0).to_kind(Kind::Float)
        }
        Precision::Binary => x.gt(0.0).to_kind(Kind::Float) * 2.0 - 1.0,
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
        let q = quantize(&x, Precision::Int8, &c);
        let v: Vec<f32> = Vec::try_from(&q.view([-1])).unwrap();
        // each dim's minimum maps to -128, its maximum to 127 (126 when float32 rounds 255 down)
        assert_eq!(&v[..2], &[-128.0, -128.0]);
        assert!(v[2] >= 126.0 && v[3] >= 126.0, "{v:?}");
        let b: Vec<f32> = Vec::try_from(&quantize(&x, Precision::Binary, &c).view([-1])).unwrap();
        assert_eq!(b, vec![-1.0, -1.0, 1.0, 1.0]);
        assert_eq!(Precision::Binary.bytes(384), 48);
        assert!(Precision::parse_list("int8,fp16").is_err());
    }
}
