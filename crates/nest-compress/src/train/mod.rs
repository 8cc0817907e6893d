//! One training engine for every adaptor method (the presets are in [`crate::method`]).
//!
//! The adaptor is a linear map `W [D0, D], b [D0]` (initialised to the identity, so training
//! starts from plain truncation) whose output prefixes are the compressed vectors. Training
//! runs in **phases**, each a chain of nested dims `[d_a > d_b > ...]`:
//!
//! - parallel (MRL, Matryoshka-Adaptor): one phase with every dim, for `epochs` epochs, the epoch
//!   with the best validation loss kept;
//! - sequential (SMRL, SMEC section 3.2): a phase per halving `[d_{k-1}, d_k]`, trained until
//!   for `epochs` epochs (the parallel methods' budget; with `patience`, until its validation
//!   loss has not improved for that many epochs), its best state kept; then rows `[d_k, d_{k-1})` of `W` are frozen: later phases only update
//!   rows `[0, d_k)` (the "sub" FC layer of the paper's Figure 2c), so a finished stage's
//!   parameters stay bit for bit.
//!
//! Each level of a chain is the first `d` outputs (truncation) or an ADS choice among its
//! parent level's dims ([`crate::ads`]); at the end the chosen dims are moved to the front, so
//! the exported map is nested by prefix. The loss of a phase, summed over its levels, is the rank
//! loss (eq. 8) plus `alpha` times similarity preservation (eq. 7) against neighbours from the
//! batch or from S-XBM ([`crate::memory`]), and optionally Matryoshka-Adaptor's all-pairs term;
//! eq. 9 with `alpha = 1` by default.
//!
//! This file runs the phases in order ([`train`]); `engine.rs` holds one phase, its epochs and
//! steps, and the ADS reordering.

use rand::SeedableRng;
use tch::{Kind, Tensor};

mod engine;

use engine::Engine;

pub use crate::config::{Neighbours, TrainConfig};
use crate::data::{Embeddings, Qrels};
use crate::memory::Memory;
use crate::phase::prepare;
pub use crate::trained::{EpochLog, Trained};
use crate::Result;

/// Trains the adaptor of `cfg` on the `train` pairs, choosing each phase's epoch on `val`.
/// `init` continues a saved nested map `(W, b)` (a resume: only the rows of `cfg.dims` train).
pub fn train(
    cfg: &TrainConfig,
    corpus: &Embeddings,
    queries: &Embeddings,
    train: &Qrels,
    val: &Qrels,
    init: Option<(Tensor, Tensor)>,
    progress: &mut dyn FnMut(&EpochLog),
) -> Result<Trained> {
    let dim = corpus.dim();
    let mut engine = Engine {
        cfg,
        corpus,
        queries,
        tr: prepare(train, queries, corpus, cfg.opts.hard_negatives),
        va: prepare(val, queries, corpus, cfg.opts.hard_negatives),
        mem: match cfg.neighbours {
            Neighbours::Memory { size, .. } => Some(Memory::new(size, dim)),
            _ => None,
        },
        rng: rand_chacha::ChaCha8Rng::seed_from_u64(cfg.opts.seed),
        step_no: 0,
        d_min: *cfg.dims.last().expect("dims"),
    };
    let mut heads = initial_heads(cfg, dim, init);
    let chains: Vec<Vec<usize>> = match cfg.sequential {
        true => cfg.dims.windows(2).map(|w| w.to_vec()).collect(),
        false => vec![cfg.dims.clone()],
    };
    let mut out = Trained {
        heads: Vec::new(),
        history: Vec::new(),
        selections: Vec::new(),
        ware: Vec::new(),
    };
    for (pi, chain) in chains.iter().enumerate() {
        let phase = engine.phase(pi, chain, &heads, &mut out.history, progress)?;
        // write the phase's best rows back into the heads (later phases keep them frozen)
        for (h, (w, b)) in heads.iter_mut().enumerate() {
            let (pw, pb) = &phase.params[h];
            let r = pw.size()[0];
            w.narrow(0, 0, r).copy_(&pw.detach());
            b.narrow(0, 0, r).copy_(&pb.detach());
        }
        if !phase.ads.is_empty() {
            engine.ads_reorder(&phase, &mut heads[0], &mut out)?;
        }
    }
    out.heads = heads
        .into_iter()
        .enumerate()
        .map(|(h, (w, b))| {
            let dims = match cfg.per_dim_heads {
                true => vec![cfg.dims[h]],
                false => cfg.dims.clone(),
            };
            (w, b, dims)
        })
        .collect();
    Ok(out)
}

/// The starting maps: `init` (one nested head), else the identity's first rows per head.
fn initial_heads(
    cfg: &TrainConfig,
    dim: usize,
    init: Option<(Tensor, Tensor)>,
) -> Vec<(Tensor, Tensor)> {
    let eye = Tensor::eye(dim as i64, (Kind::Float, tch::Device::Cpu));
    let n_heads = if cfg.per_dim_heads { cfg.dims.len() } else { 1 };
    match init {
        Some((w, b)) if !cfg.per_dim_heads => vec![(w.copy(), b.copy())],
        _ => (0..n_heads)
            .map(|h| {
                let out = if cfg.per_dim_heads {
                    cfg.dims[h]
                } else {
                    cfg.dims[0]
                };
                (
                    eye.narrow(0, 0, out as i64).copy(),
                    Tensor::zeros([out as i64], (Kind::Float, tch::Device::Cpu)),
                )
            })
            .collect(),
    }
}
