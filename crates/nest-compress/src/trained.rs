//! What adaptor training gives back: the trained maps, each epoch's log and the ADS choices.

use tch::Tensor;

/// One epoch of one phase, for the history and the diagnostics.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EpochLog {
    pub phase: usize,
    pub dims: Vec<usize>,
    pub epoch: usize,
    pub train_loss: f64,
    pub val_loss: f64,
    /// Mean |gradient| of `W`'s rows `[0, d_min)` and `[d_min, 2 d_min)` of the run's smallest
    /// dim (SMEC Figure 7), and the variance of the gradient over those rows' entries, averaged
    /// over steps (Figure 6a).
    pub grad_low: f64,
    pub grad_high: f64,
    pub grad_var: f64,
    pub seconds: f64,
    /// Of which spent retrieving S-XBM neighbours.
    pub memory_seconds: f64,
    pub steps: usize,
}

/// Trainable state: the nested map (or one per dim) and the ADS logits of each level.
#[derive(Debug)]
pub struct Trained {
    /// `(W [out, D], b [out], dims served)` per head.
    pub heads: Vec<(Tensor, Tensor, Vec<usize>)>,
    pub history: Vec<EpochLog>,
    /// For each ADS level, the chosen dims (indices into the phase's base, before reordering).
    pub selections: Vec<Vec<i64>>,
    /// For each ADS level: `(k, ADS achievement rate, truncation achievement rate)` against
    /// the WARE ranking of the phase's base dims on the training pairs (SMEC Table 2).
    pub ware: Vec<(usize, f64, f64)>,
}
