//! How an adaptor training run is set up: the shared hyper-parameters ([`Options`]), where the
//! unsupervised pairs come from ([`Neighbours`]) and the engine's configuration
//! ([`TrainConfig`]). A leaf module, so that the presets ([`crate::method`]), the engine
//! ([`crate::train`]) and one phase's loss (`crate::phase`) share these without importing
//! each other.

/// Hyper-parameters shared by every trained method.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Options {
    pub alpha: f64,
    pub scale: f64,
    pub lr: f64,
    pub batch_size: usize,
    pub epochs: usize,
    /// A sequential stage stops after this many epochs without a better validation loss; `None`
    /// (the default) runs every stage for `epochs`, the parallel methods' budget, and keeps its
    /// best validation epoch. Issue 35 measured early stopping at 3 costing SMEC 3.6 nDCG@10
    /// points at 48 dims and 2.1 at 96 (three seeds, paired, docs/COMPRESSION.md "Levers").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patience: Option<usize>,
    pub hard_negatives: usize,
    pub neighbours: usize,
    pub memory_size: usize,
    pub tau: f64,
    /// ADS passes gradient through the Gumbel-softmax weights themselves (see [`crate::ads`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ads_soft: bool,
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            alpha: 1.0,
            scale: 10.0,
            lr: 3e-3,
            batch_size: 32,
            epochs: 20,
            patience: None,
            hard_negatives: 10,
            neighbours: 10,
            memory_size: 5000,
            tau: 1.0,
            ads_soft: false,
            seed: 42,
        }
    }
}

/// Where the unsupervised pairs come from.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum Neighbours {
    None,
    /// The top-k most similar items of the same batch (SMEC eq. 4).
    Batch {
        k: usize,
    },
    /// The top-k most similar of an S-XBM memory of `size` frozen vectors.
    Memory {
        size: usize,
        k: usize,
    },
}

/// How a training run is set up.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrainConfig {
    /// Decreasing dims; `dims[0] <= D` is the widest output.
    pub dims: Vec<usize>,
    pub sequential: bool,
    /// ADS Gumbel temperature; `None` = truncation.
    pub ads_tau: Option<f64>,
    pub neighbours: Neighbours,
    /// Matryoshka-Adaptor's all-pairs similarity term.
    pub pairwise: bool,
    /// One separate map per dim (Search-Adaptor) instead of one nested map.
    pub per_dim_heads: bool,
    /// Weight of the unsupervised terms (0 when the method has none; else `opts.alpha`).
    pub alpha: f64,
    /// The shared hyper-parameters (scale, lr, batch size, epochs, patience, hard negatives,
    /// seed; `opts.epochs` is the most epochs per stage for a sequential schedule).
    pub opts: Options,
}
