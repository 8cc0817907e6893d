//! Task losses on sentence embeddings. Each takes raw (un-normalised) embeddings and uses cosine
//! similarity, so a Matryoshka prefix can be passed directly (it is re-normalised here).
//! Reference values: `tests/reference/losses.py` (PyTorch, sentence-transformers' formulas).

use tch::{Kind, Reduction, Tensor};

fn normalize(x: &Tensor) -> Tensor {
    nest_model::pooling::l2_normalize(x)
}

/// Mean cross-entropy of `logits` `[B, C]` against class indices, in the logits' own precision
/// (tch's `cross_entropy_for_logits` computes in float32).
fn cross_entropy(logits: &Tensor, target: &Tensor) -> Tensor {
    logits.log_softmax(-1, logits.kind()).nll_loss(target)
}

/// MultipleNegativesRanking / InfoNCE with in-batch negatives (van den Oord et al. 2018;
/// sentence-transformers' `MultipleNegativesRankingLoss`):
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

/// Unsupervised SimCSE (Gao et al. 2021, eq. 1): the same sentences encoded twice with
/// different dropout masks are each other's positives; temperature 0.05 = `scale` 20.
///
/// # Shapes
/// - `z1`, `z2`: `[B, d]` (two dropout views); returns a scalar
pub fn simcse(z1: &Tensor, z2: &Tensor, scale: f64) -> Tensor {
    mnrl(z1, z2, None, scale)
}

/// CoSENT (Su 2022; sentence-transformers' `CoSENTLoss`):
/// `log(1 + sum_{s_i > s_j} exp(scale * (cos_j - cos_i)))` over pairs of pairs whose gold order
/// is `s_i > s_j`, given precomputed similarities.
///
/// # Shapes
/// - `sim`: `[B]` similarities; `gold`: `[B]` scores; returns a scalar
pub fn cosent_from_sim(sim: &Tensor, gold: &Tensor, scale: f64) -> Tensor {
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

/// AnglE's angle similarity (Li & Li 2024, section 3.3; sentence-transformers'
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

/// AnglE's angle loss: CoSENT over [`angle_sim`] (sentence-transformers' `AnglELoss`).
///
/// # Shapes
/// - `a`, `b`: `[B, d]`; `gold`: `[B]`; returns a scalar
pub fn angle(a: &Tensor, b: &Tensor, gold: &Tensor, scale: f64) -> Tensor {
    cosent_from_sim(&angle_sim(a, b), gold, scale)
}

/// Mean squared error (kept for objectives that regress similarities).
pub fn mse(x: &Tensor, y: &Tensor) -> Tensor {
    x.mse_loss(y, Reduction::Mean)
}
