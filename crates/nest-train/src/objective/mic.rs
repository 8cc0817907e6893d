//! MIC: Maximizing Informational Capacity via Isotropic Subspace Alignment (`MIC.md`, section
//! 2, Appendix B-D): Soft Collapse Regularization (SCR) and Spectral Isotropy Regularization
//! (SIR) on intermediate layers.
//!
//! Paper: "MIC: Maximizing Informational Capacity in Adaptive Representations via Isotropic
//! Subspace Alignment" (Dang, Nguyen and Pham 2026, arXiv:2605.29987), section 2.1 (SCR), 2.2
//! (SIR) and 2.3 (`L_align`, the sum the objective returns).
//!
//! The component returns `L_align` (section 2.3) split into its SCR and SIR parts; the paper's
//! `L_MRL + gamma * L_align` is a recipe with an `mrl` component next to this one with weight
//! `gamma` (`recipes/mic.toml`, gamma = 0.6 as Table 4). Every term comes from the one forward
//! pass the trainer already ran (the first column: with SimCSE, the first dropout view).

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use super::component::{increasing, BuildContext, Component};
use super::{BatchOutput, Objective, StepContext, Term};

fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}
fn tenth() -> f64 {
    0.1
}
fn two() -> f64 {
    2.0
}

/// The `epsilon` of the standardisation, the CV ratio and the log (the paper gives none).
const EPS: f64 = 1e-5;

/// The keys of a `[[objective]]` table with `kind = "mic"` (defaults: Table 4 and Appendix D
/// for a 6-layer model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MicConfig {
    /// Weight of the component: `gamma` of section 2.3 (Table 4: 0.6).
    #[serde(default = "one")]
    pub weight: f64,
    /// Nested dims; empty = the recipe's `matryoshka_dims`.
    #[serde(default)]
    pub dims: Vec<usize>,
    /// Layers `L_align`; empty = [`default_layers`] ({2, 4} for six layers, Appendix D).
    #[serde(default)]
    pub layers: Vec<usize>,
    /// `tau_corr`, the tolerance of the correlation penalty.
    #[serde(default = "tenth")]
    pub tau_corr: f64,
    /// `lambda_var`, the weight of the variance floor.
    #[serde(default = "tenth")]
    pub lambda_var: f64,
    /// `t` of the uniformity kernel `exp(-2t(1 - cos))`.
    #[serde(default = "two")]
    pub uniformity_t: f64,
    /// The SCR terms; `false` = the "SIR only" ablation (Table 5).
    #[serde(default = "yes")]
    pub scr: bool,
    /// The SIR terms; `false` = "SCR only".
    #[serde(default = "yes")]
    pub sir: bool,
}

impl Default for MicConfig {
    fn default() -> Self {
        toml::Value::Table(Default::default())
            .try_into()
            .expect("every key has a default")
    }
}

/// Appendix D picks layers {2, 4} of TinyBERT-6L and {8, 10} of BERT-base ("mid-to-late");
/// the rule `round(N / 3), round(2N / 3)` gives {2, 4} for six layers (and {4, 8} for twelve).
pub fn default_layers(num_layers: usize) -> Vec<usize> {
    let mut l: Vec<usize> = [1.0 / 3.0, 2.0 / 3.0]
        .iter()
        .map(|f| ((num_layers as f64 * f).round() as usize).clamp(1, num_layers))
        .collect();
    l.dedup();
    l
}

/// Masked sequence-wise standardisation (eq. 1) of every dim at once: each dim is
/// standardised on its own, so the prefix and residual tensors of any split are slices of this.
///
/// # Shapes
/// - `h`: `[B, L, D]`; `mask`: `[B, L]`
/// - returns `X~` `[B, L, D]` (0 at padding) and `sigma` `[B, D]`
pub fn standardize(h: &Tensor, mask: &Tensor) -> (Tensor, Tensor) {
    let m = mask.to_kind(h.kind()).unsqueeze(-1);
    let n = m.sum_dim_intlist(1, true, None::<Kind>).clamp_min(1.0);
    let mu = (h * &m).sum_dim_intlist(1, true, None::<Kind>) / &n;
    let dev = (h - mu) * &m;
    // clamped before the root: a constant dim (or a one-token sequence) has variance 0, where
    // the root's gradient is infinite
    let sigma = (dev.square().sum_dim_intlist(1, true, None::<Kind>) / &n)
        .clamp_min(1e-30)
        .sqrt();
    let x = &dev / (&sigma + EPS);
    (x, sigma.squeeze_dim(1))
}

/// The token-wise cross-correlation of every pair of dims, `C = 1/B sum_i 1/N_i sum_l
/// X~_il X~_il^T` (section 2.1), as one `[D, D]` product; any split's `C` is its
/// `[..d, d..]` block.
///
/// # Shapes
/// - `x`: `[B, L, D]` from [`standardize`]; `mask`: `[B, L]`; returns `[D, D]`
pub fn correlation(x: &Tensor, mask: &Tensor) -> Tensor {
    let (b, _, dd) = x.size3().expect("[B, L, D]");
    let n = mask
        .to_kind(x.kind())
        .sum_dim_intlist(1, true, None::<Kind>)
        .clamp_min(1.0);
    let xs = (x / n.sqrt().unsqueeze(-1)).reshape([-1, dd]);
    xs.transpose(0, 1).matmul(&xs) / b as f64
}

/// `L_SCR^(d) = L_corr + lambda_var * L_var` (section 2.1) for the split at `d < D`:
/// `mean(max(0, |C_uv| - tau_corr)^2)` over the `d x (D - d)` block, and the variance floor
/// `max(0, 1 - mean sigma_pre) + 0.5 max(0, 1 - mean sigma_res)`.
///
/// # Shapes
/// - `c`: `[D, D]` from [`correlation`]; `sigma`: `[B, D]`; returns a scalar
pub fn scr(c: &Tensor, sigma: &Tensor, d: usize, tau_corr: f64, lambda_var: f64) -> Tensor {
    let dd = c.size()[0];
    let d = d as i64;
    let block = c.narrow(0, 0, d).narrow(1, d, dd - d);
    let corr = (block.abs() - tau_corr)
        .clamp_min(0.0)
        .square()
        .mean(None::<Kind>);
    let pre = sigma.narrow(1, 0, d).mean(None::<Kind>);
    let res = sigma.narrow(1, d, dd - d).mean(None::<Kind>);
    let (pre, res): (Tensor, Tensor) = (1.0 - pre, 1.0 - res);
    let var = pre.clamp_min(0.0) + res.clamp_min(0.0) * 0.5;
    corr + var * lambda_var
}

/// `L_SIR^(d) = (L_cv + L_unif) / 2` (section 2.2) on pooled prefixes: the coefficient of
/// variation of the per-dim (biased) batch variances, and `log(mean_{i != j} exp(-2t(1 -
/// cos_ij)) + eps)`. A batch of one has no pairs: its uniformity term is 0.
///
/// # Shapes
/// - `z`: `[B, d]`; returns a scalar
pub fn sir(z: &Tensor, t: f64) -> Tensor {
    let b = z.size()[0];
    let mu = z.mean_dim(0, true, None::<Kind>);
    let v = (z - mu).square().mean_dim(0, false, None::<Kind>);
    let vbar = v.mean(None::<Kind>);
    let spread = (&v - &vbar)
        .square()
        .mean(None::<Kind>)
        .clamp_min(1e-30)
        .sqrt();
    let cv = spread / (vbar + EPS);
    if b < 2 {
        return cv / 2.0;
    }
    let zn = nest_model::pooling::l2_normalize(z);
    let k = ((zn.matmul(&zn.transpose(0, 1)) - 1.0) * (2.0 * t)).exp();
    // The diagonal's sum, not `trace()`: libtorch's trace backward reads a scalar back to the
    // host (`index_fill_` with a tensor index), which a CUDA graph cannot record (H200, 2026-11-28)
    let diag = k.diagonal(0, 0, 1).sum(None::<Kind>);
    let off = (k.sum(None::<Kind>) - diag) / (b * (b - 1)) as f64;
    (cv + (off + EPS).log()) / 2.0
}

/// MIC's `L_align` with its SCR and SIR parts.
#[derive(Debug, Clone)]
pub struct Mic {
    config: MicConfig,
    hidden: usize,
    dims: Vec<usize>,
    layers: Vec<usize>,
}

impl Mic {
    /// `config.layers` resolved for a `num_layers`-layer model; `dims` increasing, `<= hidden`.
    pub fn new(
        config: MicConfig,
        dims: Vec<usize>,
        hidden: usize,
        num_layers: usize,
    ) -> std::result::Result<Self, String> {
        let layers = if config.layers.is_empty() {
            default_layers(num_layers)
        } else {
            config.layers.clone()
        };
        if let Some(l) = layers.iter().find(|&&l| l == 0 || l > num_layers) {
            return Err(format!("layer {l} is outside 1..={num_layers}"));
        }
        if !config.scr && !config.sir {
            return Err("scr and sir are both off: the component would do nothing".into());
        }
        Ok(Mic {
            config,
            hidden,
            dims,
            layers,
        })
    }
}

impl Objective for Mic {
    fn describe(&self) -> String {
        let what: Vec<&str> = [(self.config.scr, "SCR"), (self.config.sir, "SIR")]
            .iter()
            .filter(|p| p.0)
            .map(|p| p.1)
            .collect();
        format!(
            "mic[{}] layers {:?} dims {:?} tau_corr {} lambda_var {} t {}",
            what.join("+"),
            self.layers,
            self.dims,
            self.config.tau_corr,
            self.config.lambda_var,
            self.config.uniformity_t
        )
    }

    fn reads_tokens(&self) -> Option<String> {
        self.config.scr.then(|| {
            "MIC's SCR correlates token states within each sentence (turn it off with \
             scr = false, or train MIC without mini_batch_size in one process)"
                .to_string()
        })
    }

    /// Nothing drawn, nothing read back: SCR and SIR are the same tensor operations every step
    /// (masked, so a recording's padding to 16-token buckets leaves them as they are).
    fn recorded_draws(&self, _ctx: &StepContext, _num_layers: usize) -> Option<Vec<usize>> {
        Some(Vec::new())
    }

    /// `L_align = 1/(|L| |D|) sum_l sum_d (SCR + SIR)`; at `d = D` there is no residual and
    /// SCR contributes 0 (the average still counts that point).
    fn terms(&self, out: &BatchOutput, _ctx: &StepContext) -> Vec<Term> {
        let col = &out.columns[0];
        let count = (self.layers.len() * self.dims.len()) as f64;
        let (mut scr_all, mut sir_all) = (Vec::new(), Vec::new());
        for &l in &self.layers {
            if self.config.scr {
                let (x, sigma) = standardize(&col.hidden[l], &col.mask);
                let c = correlation(&x, &col.mask);
                for &d in self.dims.iter().filter(|&&d| d < self.hidden) {
                    scr_all.push(scr(
                        &c,
                        &sigma,
                        d,
                        self.config.tau_corr,
                        self.config.lambda_var,
                    ));
                }
            }
            if self.config.sir {
                let z = col.pooled(l);
                for &d in &self.dims {
                    sir_all.push(sir(&z.narrow(1, 0, d as i64), self.config.uniformity_t));
                }
            }
        }
        let mut terms = Vec::new();
        for (name, v) in [("scr", scr_all), ("sir", sir_all)] {
            if !v.is_empty() {
                terms.push(Term {
                    name: name.into(),
                    value: Tensor::stack(&v, 0).sum(None::<Kind>) / count,
                });
            }
        }
        terms
    }

    fn trained_dims(&self) -> Vec<usize> {
        self.dims.clone()
    }

    fn trained_layers(&self, num_layers: usize) -> Vec<usize> {
        vec![num_layers]
    }
}

impl Component for MicConfig {
    fn evidence(&self) -> Option<&'static str> {
        Some(
            "MIC measured below MRL from a sentence-trained backbone (all-MiniLM-L6-v2: \
             SICK-R -2.9 to -3.9, SICK-E -6.8 to -8.4) and above it from a [CLS] paper-like one \
             (SICK-E +1.0 to +1.2; 3 seeds, paired tests): docs/STRUCTURE.md, \"Why they lose \
             here\"",
        )
    }

    fn weight(&self) -> f64 {
        self.weight
    }

    fn validate(&self) -> Result<(), String> {
        if !self.dims.is_empty() {
            increasing(&self.dims, &[])?;
        }
        if !(0.0..=1.0).contains(&self.tau_corr)
            || self.lambda_var < 0.0
            || self.uniformity_t <= 0.0
        {
            return Err("tau_corr must be in [0, 1], lambda_var >= 0, uniformity_t > 0".into());
        }
        Ok(())
    }

    fn build(&self, cx: &BuildContext) -> Result<Box<dyn Objective>, String> {
        let (dims, _) = cx.dims(&self.dims, &[])?;
        Ok(Box::new(Mic::new(
            self.clone(),
            dims,
            cx.hidden,
            cx.num_layers,
        )?))
    }
}
