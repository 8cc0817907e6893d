//! Task losses on sentence embeddings. Each takes raw (un-normalised) embeddings and uses cosine
//! similarity, so a Matryoshka prefix can be passed directly (it is re-normalised here).
//! Reference values: `tests/reference/losses.py` (PyTorch, sentence-transformers' formulas).

use tch::{Kind, Reduction, Tensor};

mod pca;
pub use pca::pca_compress;

fn normalize(x: &Tensor) -> Tensor {
    nest_model::pooling::l2_normalize(x)
}

/// Mean cross-entropy of `logits` `[B, C]` against class indices, in the logits' own precision
/// (tch's `cross_entropy_for_logits` computes in float32).
fn cross_entropy(logits: &Tensor, target: &Tensor) -> Tensor {
    logits.log_softmax(-1, logits.kind()).nll_loss(target)
}

/// MultipleNegativesRanking / InfoNCE with in-batch negatives ("Representation Learning with
/// Contrastive Predictive Coding", van den Oord et al. 2018, arXiv:1807.03748, eq. 4; "Efficient
/// Natural Language Response Suggestion for Smart Reply", Henderson et al. 2017,
/// arXiv:1705.00652; sentence-transformers' `MultipleNegativesRankingLoss`):
/// `CE(scale * cos(a_i, [p ; n])_j, target i)`, every other positive (and every hard negative)
/// being a negative for anchor `i`.
///
/// # Shapes
/// - `a`, `p`: `[B, d]`; `n`: `[B, d]` hard negatives or `None`; returns a scalar
pub fn mnrl(a: &Tensor, p: &Tensor, n: Option<&Tensor>, scale: f64) -> Tensor {
    let b = a.size()[0];
    let cands = match n {
        Some(n) => Tensor::cat(&[normalize(p), normalize(n)], 0),
        None => normalize(p),
    };
    let logits = normalize(a).matmul(&cands.transpose(0, 1)) * scale;
    let target = Tensor::arange(b, (Kind::Int64, a.device()));
    cross_entropy(&logits, &target)
}

/// Symmetric MNRL (sentence-transformers' `MultipleNegativesSymmetricRankingLoss`): the mean of
/// anchor -> candidates (positives and hard negatives) and positive -> anchors.
///
/// # Shapes
/// - as [`mnrl`]; returns a scalar
pub fn mnrl_symmetric(a: &Tensor, p: &Tensor, n: Option<&Tensor>, scale: f64) -> Tensor {
    let b = a.size()[0];
    let forward = mnrl(a, p, n, scale);
    let logits = normalize(p).matmul(&normalize(a).transpose(0, 1)) * scale;
    let backward = cross_entropy(&logits, &Tensor::arange(b, (Kind::Int64, a.device())));
    (forward + backward) / 2.0
}

/// Unsupervised SimCSE ("SimCSE: Simple Contrastive Learning of Sentence Embeddings", Gao et
/// al. 2021, arXiv:2104.08821, eq. 1): the same sentences encoded twice with
/// different dropout masks are each other's positives; temperature 0.05 = `scale` 20.
///
/// # Shapes
/// - `z1`, `z2`: `[B, d]` (two dropout views); returns a scalar
pub fn simcse(z1: &Tensor, z2: &Tensor, scale: f64) -> Tensor {
    mnrl(z1, z2, None, scale)
}

/// CoSENT (Su 2022, a blog post without an arXiv id; the loss of "AnglE-optimized Text
/// Embeddings", Li & Li 2023, arXiv:2309.12871; sentence-transformers' `CoSENTLoss`):
/// `log(1 + sum_{s_i > s_j} exp(scale * (cos_j - cos_i)))` over pairs of pairs whose gold order
/// is `s_i > s_j`, given precomputed similarities.
///
/// # Shapes
/// - `sim`: `[B]` similarities; `gold`: `[B]` scores; returns a scalar
fn cosent_from_sim(sim: &Tensor, gold: &Tensor, scale: f64) -> Tensor {
    let s = sim * scale;
    let diff = s.unsqueeze(1) - s.unsqueeze(0); // s_i - s_j
    let wrong = gold.unsqueeze(1).lt_tensor(&gold.unsqueeze(0)); // gold_i < gold_j
    let masked: Tensor = diff - (1.0 - wrong.to_kind(sim.kind())) * 1e12;
    let flat = Tensor::cat(
        &[
            Tensor::zeros([1], (sim.kind(), sim.device())),
            masked.view([-1]),
        ],
        0,
    );
    flat.logsumexp([0i64].as_slice(), false)
}

/// CoSENT on cosine similarity.
///
/// # Shapes
/// - `a`, `b`: `[B, d]`; `gold`: `[B]`; returns a scalar
pub fn cosent(a: &Tensor, b: &Tensor, gold: &Tensor, scale: f64) -> Tensor {
    let cos = (normalize(a) * normalize(b)).sum_dim_intlist(1, false, a.kind());
    cosent_from_sim(&cos, gold, scale)
}

/// The spread-out regulariser of Zhang et al. 2017, "Learning Spread-out Local Feature
/// Descriptors" (arXiv:1708.06320, eq. 4: global orthogonal regularisation), as
/// sentence-transformers' `GlobalOrthogonalRegularizationLoss` computes it with both weights 1:
/// with `G` the cosines of distinct rows, `M1 = mean(G)`, `M2 = mean(G^2)`,
/// `M1^2 + max(0, M2 - 1/d)`. Pushes unrelated rows towards orthogonal; on the signs of the rows
/// its first part is the bit-balance penalty of learning to hash.
///
/// # Shapes
/// - `x`: `[B, d]` with B >= 2; returns a scalar
pub fn spread_out(x: &Tensor) -> Tensor {
    let (b, d) = (x.size()[0], x.size()[1]);
    let v = normalize(x);
    let g = v.matmul(&v.tr());
    let off = Tensor::ones([b, b], (x.kind(), x.device())) - Tensor::eye(b, (x.kind(), x.device()));
    let n = (b * (b - 1)).max(1) as f64;
    let m1 = (&g * &off).sum(x.kind()) / n;
    let m2 = (g.square() * &off).sum(x.kind()) / n;
    m1.square() + (m2 - 1.0 / d as f64).relu()
}

/// AnglE's angle similarity ("AnglE-optimized Text Embeddings", Li & Li, arXiv:2309.12871,
/// section 3.3; sentence-transformers'
/// `pairwise_angle_sim`): each vector split in halves as real and imaginary parts, the
/// normalised complex quotient's components summed, absolute value.
///
/// # Shapes
/// - `x`, `y`: `[B, d]` with even `d`; returns `[B]`
pub fn angle_sim(x: &Tensor, y: &Tensor) -> Tensor {
    let h = x.size()[1] / 2;
    let (a, b) = (x.narrow(1, 0, h), x.narrow(1, h, h));
    let (c, d) = (y.narrow(1, 0, h), y.narrow(1, h, h));
    let z = (c.square() + d.square()).sum_dim_intlist(1, true, x.kind());
    let re = (&a * &c + &b * &d) / &z;
    let im = (&b * &c - &a * &d) / &z;
    let dz = (a.square() + b.square())
        .sum_dim_intlist(1, true, x.kind())
        .sqrt();
    let dw = z.sqrt();
    let ratio = dz / dw;
    let re = re / &ratio;
    let im = im / &ratio;
    Tensor::cat(&[re, im], 1)
        .sum_dim_intlist(1, false, x.kind())
        .abs()
}

/// AnglE's angle loss (arXiv:2309.12871): CoSENT over [`angle_sim`] (sentence-transformers'
/// `AnglELoss`).
///
/// # Shapes
/// - `a`, `b`: `[B, d]`; `gold`: `[B]`; returns a scalar
pub fn angle(a: &Tensor, b: &Tensor, gold: &Tensor, scale: f64) -> Tensor {
    cosent_from_sim(&angle_sim(a, b), gold, scale)
}

/// Temperature-scaled KL alignment of a student distribution to a teacher's over the embedding
/// coordinates: `T * KL(softmax(t / T) || softmax(s / T))`, summed over coordinates and divided
/// by the number of rows (PyTorch's `kl_div(log_softmax(s / T), softmax(t / T),
/// reduction="batchmean") * T`). This is the reading of 2DMSE eq. (6) ("2D Matryoshka Sentence
/// Embeddings", arXiv:2402.14776) that
/// sentence-transformers' `AdaptiveLayerLoss` (T = 0.3) and AnglE's `compute_distillation_loss`
/// (T = 1) share; the paper leaves the distributions undefined (section 3.3). Gradient flows
/// into both sides unless the caller detaches the teacher.
///
/// # Shapes
/// - `student`, `teacher`: `[N, d]`; returns a scalar
pub fn kl_align(student: &Tensor, teacher: &Tensor, temperature: f64) -> Tensor {
    let n = student.size()[0] as f64;
    let log_q = (student / temperature).log_softmax(-1, student.kind());
    let log_p = (teacher / temperature).log_softmax(-1, teacher.kind());
    let kl = (log_p.exp() * (&log_p - log_q)).sum(student.kind());
    kl * (temperature / n)
}

/// AnglE's `compute_distillation_loss` (ESE, Li et al. 2024 "ESE: Espresso Sentence
/// Embeddings", arXiv:2402.14776 later versions, section 3.2, learn-to-compress): `mse_weight * MSE(x, y) + T * KL(softmax(y / T)
/// || softmax(x / T))` (batchmean), the KL skipped when `T = 0`.
///
/// # Shapes
/// - `x`, `y`: `[N, d]`; returns a scalar
pub fn mse_kl(x: &Tensor, y: &Tensor, mse_weight: f64, temperature: f64) -> Tensor {
    let mut loss = x.mse_loss(y, Reduction::Mean) * mse_weight;
    if temperature > 0.0 {
        #[allow(clippy::assign_op_pattern)]
        let sum = loss + kl_align(x, y, temperature);
        loss = sum;
    }
    loss
}
