//! SMEC's losses (section 3-4 of `shared/papers/SMEC.md`).
//!
//! Paper: "SMEC: Rethinking Matryoshka Representation Learning for Retrieval Embedding
//! Compression" (Zhang, Chen, Liu and Zheng, EMNLP 2025, arXiv:2510.12474), eq. 7 (similarity
//! preservation), eq. 8 (rank loss, from "Search-Adaptor", Yoon et al. 2023, arXiv:2310.08750)
//! and eq. 9 (their sum); the all-pairs term of "Matryoshka-Adaptor" (Yoon et al. 2024,
//! arXiv:2407.20243).

use nest_model::pooling::l2_normalize;
use tch::{Kind, Reduction, Tensor};

/// Rank loss (SMEC eq. 8, from Search-Adaptor): for each query `i` and documents `j`, `k` with
/// `y_ij > y_ik`, `(y_ij - y_ik) * log(1 + exp(s_ik - s_ij))`, where `s = scale * cos`.
///
/// The paper sums over `(i, j, k)` (and over dims `m`, which the caller does); this returns the
/// mean over the ordered pairs that count, so the learning rate does not depend on the batch's
/// size. `scale` (1 in the paper's formula) is an option: raw cosines in `[-1, 1]` give the
/// softplus little slope; `nest compress --scale` picks it on the validation split.
///
/// # Shapes
/// - `q`: `[B, d]` query vectors, `docs`: `[C, d]` candidate vectors (any norm)
/// - `rel`: `[B, C]` relevance (0 = not relevant); returns a scalar
pub fn rank_loss(q: &Tensor, docs: &Tensor, rel: &Tensor, scale: f64) -> Tensor {
    let s = cos_matrix(q, docs) * scale; // [B, C]
                                         // only j with y_ij > 0 can satisfy y_ij > y_ik >= 0: gather those (i, j) rows instead of
                                         // building the [B, C, C] cube (same value, ~C/|positives| times less work)
    let pos = rel.gt(0.0).nonzero(); // [P, 2]
    let (qi, dj) = (pos.select(1, 0), pos.select(1, 1));
    let y_rows = rel.index_select(0, &qi); // [P, C] = y_ik
    let y_pos = y_rows.gather(1, &dj.unsqueeze(1), false); // [P, 1] = y_ij
    let s_rows = s.index_select(0, &qi); // [P, C] = s_ik
    let s_pos = s_rows.gather(1, &dj.unsqueeze(1), false); // [P, 1] = s_ij
    let gain = (y_pos - y_rows).relu();
    let count = gain.gt(0.0).sum(Kind::Float).clamp_min(1.0);
    (gain * (s_rows - s_pos).softplus()).sum(Kind::Float) / count
}

/// Cosine similarity of every row of `a` with every row of `b`: `[A, B]`.
pub fn cos_matrix(a: &Tensor, b: &Tensor) -> Tensor {
    l2_normalize(a).matmul(&l2_normalize(b).tr())
}

/// Row-wise cosine of `a [N, K, d]` with `b [N, K, d]`: `[N, K]`.
pub fn cos_rows(a: &Tensor, b: &Tensor) -> Tensor {
    (l2_normalize(a) * l2_normalize(b)).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float)
}

/// Similarity preservation (SMEC eq. 7, the unsupervised loss): the mean over the given pairs of
/// `|Sim(emb_i, emb_j) - Sim(emb_i[:d], emb_j[:d])|`, the first computed on the frozen
/// embeddings (a constant), the second on the compressed ones. The paper sums over `i` and
/// `j in N_K(i)`; the mean keeps the weight `alpha` independent of batch and `K`.
///
/// # Shapes
/// - `frozen`, `compressed`: `[N, K]` similarities of the same pairs; returns a scalar
pub fn similarity_gap(frozen: &Tensor, compressed: &Tensor) -> Tensor {
    compressed.l1_loss(&frozen.detach(), Reduction::Mean)
}

/// Matryoshka-Adaptor's pairwise term (Yoon et al. 2024; SMEC eq. 3): similarity preservation
/// over every in-batch pair `i != j`.
///
/// # Shapes
/// - `frozen`: `[N, D]`, `compressed`: `[N, d]`; returns a scalar
pub fn pairwise_gap(frozen: &Tensor, compressed: &Tensor) -> Tensor {
    let n = frozen.size()[0];
    let off = Tensor::ones([n, n], (Kind::Bool, frozen.device()))
        .logical_xor(&Tensor::eye(n, (Kind::Bool, frozen.device())));
    let s0 = cos_matrix(frozen, frozen).masked_select(&off);
    let s1 = cos_matrix(compressed, compressed).masked_select(&off);
    similarity_gap(&s0, &s1)
}
