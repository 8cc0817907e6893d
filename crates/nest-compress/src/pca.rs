//! The PCA baseline (SMEC section 4), as a nested adaptor: `y = V (x - mean)` with the principal
//! axes `V` of the (L2-normalised) corpus embeddings in order of explained variance, so each
//! prefix is the top-d projection.

use tch::{Kind, Tensor};

/// `(W [D, D], b [D])` of the PCA map fitted on `x [N, D]`.
pub fn fit(x: &Tensor) -> (Tensor, Tensor) {
    let x = x.to_kind(Kind::Double);
    let mean = x.mean_dim([0i64].as_slice(), false, Kind::Double);
    let c = &x - &mean;
    let cov = c.tr().matmul(&c) / (x.size()[0] as f64 - 1.0).max(1.0);
    let (vals, vecs) = cov.linalg_eigh("L");
    let order = vals.argsort(0, true);
    let w = vecs.index_select(1, &order).tr().contiguous(); // rows = axes, largest first
    let b = -w.matmul(&mean);
    (w.to_kind(Kind::Float), b.to_kind(Kind::Float))
}
