//! ESE's PCA target ([`pca_compress`]) and the randomised SVD it takes (`torch.svd_lowrank`).
//!
//! Kept apart from the task losses because it cannot run inside a recorded step: an SVD
//! checks its result on the host (libtorch's error check reads the solver's status back), so
//! ESE with its PCA term trains eagerly on a GPU (`Objective::recorded_draws`), and
//! `tests/recordable.rs`, which scans the files recorded steps run, does not scan this one.
//! Reference values: `tests/reference/objectives.py` (`torch.svd_lowrank`).

use tch::Tensor;

/// Randomised truncated SVD as `torch.svd_lowrank(a, q, niter)` (Halko et al. 2009, algorithm
/// 5.1 with `niter` power iterations), drawing its Gaussian start from libtorch's generator
/// exactly as PyTorch does, so that the same seed gives PyTorch's result. Returns `(U, S)`.
///
/// # Shapes
/// - `a`: `[m, n]`; returns `U` `[m, q]`, `S` `[q]`
fn svd_lowrank(a: &Tensor, q: i64, niter: usize) -> (Tensor, Tensor) {
    let (m, n) = a.size2().expect("svd_lowrank takes a matrix");
    // PyTorch sketches the transpose of a wide matrix and swaps U and V at the end
    let wide = m < n;
    let a = if wide {
        a.transpose(0, 1)
    } else {
        a.shallow_clone()
    };
    let qb = approximate_basis(&a, q, niter);
    // b: [q, cols]. torch.svd (reduced) = torch.linalg.svd with V instead of V^H; the
    // `driver` argument of linalg_svd is CUDA-only and tch cannot pass "none". It checks its
    // result on the host (module docs)
    let b = qb.transpose(0, 1).matmul(&a);
    let (u, s, v) = b.svd(true, true);
    if wide {
        (v, s)
    } else {
        (qb.matmul(&u), s)
    }
}

/// `torch._lowrank.get_approximate_basis`: an orthonormal basis of `a`'s range from a Gaussian
/// sketch refined by `niter` power iterations.
///
/// # Shapes
/// - `a`: `[m, n]`; returns `[m, q]`
fn approximate_basis(a: &Tensor, q: i64, niter: usize) -> Tensor {
    let n = a.size()[1];
    let r = Tensor::randn([n, q], (a.kind(), a.device()));
    let orth = |x: &Tensor| Tensor::linalg_qr(x, "reduced").0;
    let mut qb = orth(&a.matmul(&r));
    let at = a.transpose(0, 1);
    for _ in 0..niter {
        qb = orth(&at.matmul(&qb));
        qb = orth(&a.matmul(&qb));
    }
    qb
}

/// ESE's PCA target (AnglE's `AngleESETrainer.pca_compress`, Espresso section 3.2): the
/// embeddings projected on the top-`k` singular directions, scaled by their singular values, of
/// the attention-like matrix `A = softmax(m^T m / sqrt(D))`; computed without gradient.
///
/// # Shapes
/// - `m`: `[N, D]`; returns `[N, k]`
pub fn pca_compress(m: &Tensor, k: usize) -> Tensor {
    let _g = tch::no_grad_guard();
    let m = m.detach();
    let d = m.size()[1] as f64;
    let a = (m.transpose(0, 1).matmul(&m) / d.sqrt()).softmax(-1, m.kind());
    let (u, s) = svd_lowrank(&a, k as i64, 2);
    m.matmul(&(u * s.unsqueeze(0)))
}
