//! The information-bottleneck term of IBKD (`IBKD.md` section 3.2, eq. 6-7): `beta * HSIC(X,
//! S)` between the input's representation `X` and the student's sentence vector `S`, minimised
//! so that `S` keeps as little of the raw input as the task allows.
//!
//! `X` is left open by the paper. Nest follows the authors' code (`Alibaba-NLP/IBKD`,
//! `simcse/models_unsup.py`: `pooler_type='avg_first'` with `layer = 0`): the mean-pooled
//! output of the student's embedding layer (hidden state 0), with gradient, as there. `S` is the
//! pooled last layer before normalisation (their `pooler_output`).

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use super::{BatchOutput, Objective, StepContext, Term};

fn one() -> f64 {
    1.0
}
fn half() -> f64 {
    0.5
}

/// The Gram kernels of Table 4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// `exp(-gamma ||x - y||^2)` (eq. 7 prints `exp(gamma ||x - y||)`; the authors' code squares
    /// the distance and negates, as every RBF kernel does).
    Rbf,
    /// Inverse multiquadric `1 / sqrt(||x - y||^2 + gamma)` (the authors' `imq_kernel`).
    Imq,
    /// Cosine similarity (the authors' `linear_kernel` normalises the rows).
    Linear,
}

/// The keys of a `[[objective]]` table with `kind = "hsic"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HsicConfig {
    /// `beta` (stage 1: `beta1` = 1.0, stage 2: `beta2` = 0.5, section 4.3).
    #[serde(default = "one")]
    pub weight: f64,
    /// The kernel of both Gram matrices (Table 4 compares them; RBF by default).
    #[serde(default = "rbf")]
    pub kernel: Kernel,
    /// `gamma` of the kernel (section 4.3: 0.5).
    #[serde(default = "half")]
    pub gamma: f64,
    /// The hidden state pooled for `X` (0 = the embedding layer's output).
    #[serde(default)]
    pub input_layer: usize,
}

fn rbf() -> Kernel {
    Kernel::Rbf
}

impl Default for HsicConfig {
    fn default() -> Self {
        toml::Value::Table(Default::default())
            .try_into()
            .expect("every key has a default")
    }
}

/// Squared Euclidean distances between rows.
///
/// # Shapes
/// - `z`: `[n, d]`; returns `[n, n]`
fn sq_dists(z: &Tensor) -> Tensor {
    let g = z.matmul(&z.transpose(0, 1));
    let n = g.diagonal(0, 0, 1);
    (n.unsqueeze(1) + n.unsqueeze(0) - g * 2.0).clamp_min(0.0)
}

/// The Gram matrix of `z` under `kernel`.
///
/// # Shapes
/// - `z`: `[n, d]`; returns `[n, n]`
pub fn gram(z: &Tensor, kernel: Kernel, gamma: f64) -> Tensor {
    match kernel {
        Kernel::Rbf => (sq_dists(z) * -gamma).exp(),
        Kernel::Imq => (sq_dists(z) + gamma).rsqrt(),
        Kernel::Linear => {
            let u = nest_model::pooling::l2_normalize(z);
            u.matmul(&u.transpose(0, 1))
        }
    }
}

/// The empirical HSIC of eq. 6, `tr(K_X H K_S H) / n^2` with `H = I - 11^T / n`, computed as
/// `sum(K~_X * K_S) / n^2` where `K~_X = H K_X H` (no `n x n` products beyond the centring).
///
/// # Shapes
/// - `kx`, `ks`: `[n, n]` symmetric; returns a scalar
pub fn hsic(kx: &Tensor, ks: &Tensor) -> Tensor {
    let n = kx.size()[0] as f64;
    let row = kx.mean_dim(0, true, None::<Kind>);
    let col = kx.mean_dim(1, true, None::<Kind>);
    let centred = kx - row - col + kx.mean(None::<Kind>);
    (centred * ks).sum(None::<Kind>) / (n * n)
}

/// `beta * HSIC(X, S)` on the first column of a batch.
#[derive(Debug, Clone)]
pub struct Hsic {
    pub config: HsicConfig,
}

impl Objective for Hsic {
    fn describe(&self) -> String {
        format!(
            "hsic({:?}, gamma {}) of hidden state {} and the last layer",
            self.config.kernel, self.config.gamma, self.config.input_layer
        )
    }

    fn terms(&self, out: &BatchOutput, _ctx: &StepContext) -> Vec<Term> {
        let col = &out.columns[0];
        let x = col.pooled_raw(self.config.input_layer);
        let s = col.pooled(out.layers);
        let (kx, ks) = (
            gram(&x, self.config.kernel, self.config.gamma),
            gram(&s, self.config.kernel, self.config.gamma),
        );
        vec![Term {
            name: "hsic".into(),
            value: hsic(&kx, &ks),
        }]
    }

    fn trained_dims(&self) -> Vec<usize> {
        Vec::new()
    }

    fn trained_layers(&self, _num_layers: usize) -> Vec<usize> {
        Vec::new()
    }
}
