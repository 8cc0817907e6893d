//! The methods `nest compress` offers, as presets of the one engine ([`crate::train`]).
//!
//! | method | schedule | dims chosen by | unsupervised pairs | heads |
//! |---|---|---|---|---|
//! | `smec` | sequential (SMRL) | ADS | S-XBM top-k | one nested |
//! | `mrl` | parallel | truncation | in-batch top-k (eq. 4) | one nested |
//! | `mrl+smrl`, `mrl+ads`, `mrl+sxbm` | MRL with one of SMEC's three parts (Table 1) | | | |
//! | `matryoshka-adaptor` | parallel | truncation | in-batch top-k + all pairs | one nested |
//! | `search-adaptor` | parallel | a map per dim | none (rank loss only) | one per dim |
//! | `pca`, `truncate` | not trained: PCA fit on the corpus; the identity | | | |
//!
//! The Search- and Matryoshka-Adaptor rows follow SMEC's own description of them (Figure 2 and
//! section 3.1: a linear layer per dim trained in parallel; one shared layer whose nested outputs
//! are trained together with in-batch pair mining); their papers' extra regularisers
//! (reconstruction) are left out, and every trained method shares the rank loss (eq. 8), the
//! identity initialisation and the optimiser, so the rows differ only in what the table says.

pub use crate::config::Options;
use crate::config::{Neighbours, TrainConfig};
use crate::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Smec,
    Mrl,
    MrlSmrl,
    MrlAds,
    MrlSxbm,
    MatryoshkaAdaptor,
    SearchAdaptor,
    Pca,
    Truncate,
}

pub const ALL: [(&str, Method); 9] = [
    ("smec", Method::Smec),
    ("mrl", Method::Mrl),
    ("mrl+smrl", Method::MrlSmrl),
    ("mrl+ads", Method::MrlAds),
    ("mrl+sxbm", Method::MrlSxbm),
    ("matryoshka-adaptor", Method::MatryoshkaAdaptor),
    ("search-adaptor", Method::SearchAdaptor),
    ("pca", Method::Pca),
    ("truncate", Method::Truncate),
];

impl Method {
    pub fn parse(s: &str) -> Result<Method> {
        ALL.iter()
            .find(|(n, _)| *n == s)
            .map(|p| p.1)
            .ok_or_else(|| {
                let names: Vec<&str> = ALL.iter().map(|p| p.0).collect();
                Error::option(
                    "--method",
                    format!("unknown method '{s}', expected one of {}", names.join(", ")),
                )
            })
    }

    pub fn name(self) -> &'static str {
        ALL.iter()
            .find(|p| p.1 == self)
            .map(|p| p.0)
            .expect("listed")
    }

    /// Whether the method trains (PCA and truncation do not).
    pub fn trains(self) -> bool {
        !matches!(self, Method::Pca | Method::Truncate)
    }

    /// Whether the method trains stage by stage (SMRL), which needs halving dims.
    pub fn sequential(self) -> bool {
        matches!(self, Method::Smec | Method::MrlSmrl)
    }

    /// The engine's configuration for `dims` (decreasing).
    pub fn config(self, dims: &[usize], o: &Options) -> TrainConfig {
        let memory = Neighbours::Memory {
            size: o.memory_size,
            k: o.neighbours,
        };
        let batch = Neighbours::Batch { k: o.neighbours };
        let (ads, neighbours, pairwise, per_dim) = match self {
            Method::Smec => (true, memory, false, false),
            Method::Mrl | Method::MrlSmrl => (false, batch, false, false),
            Method::MrlAds => (true, batch, false, false),
            Method::MrlSxbm => (false, memory, false, false),
            Method::MatryoshkaAdaptor => (false, batch, true, false),
            Method::SearchAdaptor | Method::Pca | Method::Truncate => {
                (false, Neighbours::None, false, true)
            }
        };
        TrainConfig {
            dims: dims.to_vec(),
            sequential: self.sequential(),
            ads_tau: ads.then_some(o.tau),
            neighbours,
            pairwise,
            per_dim_heads: per_dim,
            alpha: if matches!(neighbours, Neighbours::None) {
                0.0
            } else {
                o.alpha
            },
            opts: o.clone(),
        }
    }
}

/// Checks a dim list against the input size and the method: decreasing, at most `input`, and
/// halving at every step for the sequential methods (SMEC section 3.2: `D -> D/2 -> D/4 ...`).
pub fn check_dims(dims: &[usize], input: usize, method: Method) -> Result<()> {
    let bad = |m: String| Err(Error::option("--dims", m));
    if dims.is_empty() || dims.contains(&0) {
        return bad(format!("{dims:?}: expected one or more dims >= 1"));
    }
    if let Some(d) = dims.iter().find(|&&d| d > input) {
        return bad(format!(
            "dim {d} is larger than the embeddings' {input} dims"
        ));
    }
    if dims.windows(2).any(|w| w[0] <= w[1]) {
        return bad(format!(
            "{dims:?}: expected dims in increasing order, e.g. {},{},{input}",
            input / 4,
            input / 2
        ));
    }
    if method.sequential() {
        if let Some(w) = dims.windows(2).find(|w| w[1] * 2 != w[0]) {
            return bad(format!(
                "{dims:?}: {} halves {} -> {} -> ... (SMRL); {} -> {} is not a halving",
                method.name(),
                dims[0],
                dims[0] / 2,
                w[0],
                w[1]
            ));
        }
    }
    Ok(())
}
