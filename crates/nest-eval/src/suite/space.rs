//! The vectors of one cell: the `dim`-prefix (or the adaptor's output) of the cached pooled
//! rows, L2-normalised and quantised, and the similarity of row pairs at a precision.

use nest_model::pooling::truncate_normalize;
use tch::{Kind, Tensor};

use super::spec::GridSpec;
use crate::quantize::{quantize, scoring_rows, Calibration, Precision};

/// The L2-normalised `dim`-vectors of the given rows: the prefix, or the adaptor's output.
pub(crate) fn rows_at(pooled: &Tensor, rows: &Tensor, dim: usize, g: &GridSpec) -> Tensor {
    let x = pooled.index_select(0, rows);
    match &g.adaptor {
        Some(a) => a
            .apply(&x, dim)
            .expect("dims checked against the adaptor before the run"),
        None => truncate_normalize(&x, dim),
    }
}

/// Normalised `dim`-prefix of the given rows, quantised with ranges from `calib_rows`.
pub(crate) fn space(
    pooled: &Tensor,
    rows: &Tensor,
    calib_rows: &Tensor,
    dim: usize,
    p: Precision,
    g: &GridSpec,
) -> Tensor {
    let e = rows_at(pooled, rows, dim, g);
    if p == Precision::Float32 {
        return e;
    }
    let c = rows_at(pooled, calib_rows, dim, g);
    quantize(&e, p, &Calibration::from(&c))
}

/// Each row pair's similarity at precision `p` (cosine; int8: the index's estimate).
pub(crate) fn row_sim(a: &Tensor, b: &Tensor, p: Precision) -> Vec<f64> {
    let c = (scoring_rows(a, p) * scoring_rows(b, p)).sum_dim_intlist(1, false, Kind::Double);
    Vec::<f64>::try_from(&c).unwrap_or_default()
}
