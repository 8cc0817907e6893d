//! One training engine for every adaptor method (the presets are in [`crate::method`]).
//!
//! The adaptor is a linear map `W [D0, D], b [D0]` (initialised to the identity, so training
//! starts from plain truncation) whose output prefixes are the compressed vectors. Training
//! runs in **phases**, each a chain of nested dims `[d_a > d_b > ...]`:
//!
//! - parallel (MRL, Matryoshka-Adaptor): one phase with every dim, for `epochs` epochs, the epoch
//!   with the best validation loss kept;
//! - sequential (SMRL, SMEC section 3.2): a phase per halving `[d_{k-1}, d_k]`, trained until
//!   its validation loss has not improved for `patience` epochs (at most `stage_epochs`), its
//!   best state kept; then rows `[d_k, d_{k-1})` of `W` are frozen: later phases only update
//!   rows `[0, d_k)` (the "sub" FC layer of the paper's Figure 2c), so a finished stage's
//!   parameters stay bit for bit.
//!
//! Each level of a chain is the first `d` outputs (truncation) or an ADS choice among its
//! parent level's dims ([`crate::ads`]); at the end the chosen dims are moved to the front, so
//! the exported map is nested by prefix. The loss of a phase, summed over its levels, is the rank
//! loss (eq. 8) plus `alpha` times similarity preservation (eq. 7) against neighbours from the
//! batch or from S-XBM ([`crate::memory`]), and optionally Matryoshka-Adaptor's all-pairs term;
//! eq. 9 with `alpha = 1` by default.

use std::time::Instant;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use tch::{Kind, Tensor};

use crate::ads::Ads;
pub use crate::config::{Neighbours, TrainConfig};
use crate::data::{Embeddings, Qrels};
use crate::memory::Memory;
use crate::phase::{batch, in_batch_neighbours, prepare, validate, Phase};
use crate::{Error, Result};
use nest_model::optim::AdamW;

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

// long: one engine for every adaptor method, phase by phase (batches, loss, Adam, validation,
// early stop, freezing, ADS reordering); the split into phase steps is open in issue 19.
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
    let d0 = cfg.dims[0];
    let tr = prepare(train, queries, corpus, cfg.opts.hard_negatives);
    let va = prepare(val, queries, corpus, cfg.opts.hard_negatives);
    let eye = Tensor::eye(dim as i64, (Kind::Float, tch::Device::Cpu));
    let n_heads = if cfg.per_dim_heads { cfg.dims.len() } else { 1 };
    let mut heads: Vec<(Tensor, Tensor)> = match init {
        Some((w, b)) if !cfg.per_dim_heads => vec![(w.copy(), b.copy())],
        _ => (0..n_heads)
            .map(|h| {
                let out = if cfg.per_dim_heads { cfg.dims[h] } else { d0 };
                (
                    eye.narrow(0, 0, out as i64).copy(),
                    Tensor::zeros([out as i64], (Kind::Float, tch::Device::Cpu)),
                )
            })
            .collect(),
    };
    let chains: Vec<Vec<usize>> = if cfg.sequential {
        cfg.dims.windows(2).map(|w| w.to_vec()).collect()
    } else {
        vec![cfg.dims.clone()]
    };
    let d_min = *cfg.dims.last().expect("dims");
    let mut history = Vec::new();
    let mut selections = Vec::new();
    let mut ware = Vec::new();
    let mut mem = match cfg.neighbours {
        Neighbours::Memory { size, .. } => Some(Memory::new(size, dim)),
        _ => None,
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(cfg.opts.seed);
    let mut step_no: u64 = 0;
    for (pi, chain) in chains.iter().enumerate() {
        let rows = chain[0] as i64;
        let params: Vec<(Tensor, Tensor)> = heads
            .iter()
            .map(|(w, b)| {
                let r = if cfg.per_dim_heads { w.size()[0] } else { rows };
                (
                    w.narrow(0, 0, r).copy().set_requires_grad(true),
                    b.narrow(0, 0, r).copy().set_requires_grad(true),
                )
            })
            .collect();
        let ads: Vec<Ads> = match cfg.ads_tau {
            Some(tau) if !cfg.per_dim_heads => chain[1..]
                .iter()
                .map(|&k| Ads::new(chain[0], k, tau))
                .collect(),
            _ => Vec::new(),
        };
        let phase = Phase {
            cfg,
            chain: chain.clone(),
            params,
            ads,
        };
        let mut leaves: Vec<Tensor> = phase
            .params
            .iter()
            .flat_map(|(w, b)| [w.shallow_clone(), b.shallow_clone()])
            .collect();
        leaves.extend(phase.ads.iter().map(|a| a.logits.shallow_clone()));
        // Adam (no weight decay): the workspace's one AdamW, with PyTorch's update
        let named = leaves
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("p{i:04}"), t.shallow_clone()))
            .collect();
        let mut adam = AdamW::new(named, 0.0);
        let mut best: Option<(f64, Vec<Tensor>)> = None;
        let mut since_best = 0;
        for epoch in 0..cfg.opts.epochs {
            let t0 = Instant::now();
            let mut order: Vec<usize> = (0..tr.q.len()).collect();
            order.shuffle(&mut rng);
            let (mut sum, mut n, mut mem_s) = (0.0, 0usize, 0.0);
            let (mut g_lo, mut g_hi, mut g_var) = (0.0, 0.0, 0.0);
            for members in order.chunks(cfg.opts.batch_size) {
                tch::manual_seed((cfg.opts.seed + step_no) as i64);
                step_no += 1;
                let b = batch(&tr, members);
                let levels = phase.levels(true);
                let items = Tensor::cat(
                    &[
                        queries.x.index_select(0, &Tensor::from_slice(&b.0)),
                        corpus.x.index_select(0, &Tensor::from_slice(&b.1)),
                    ],
                    0,
                );
                let tm = Instant::now();
                let nb = match (cfg.neighbours, mem.as_ref()) {
                    (Neighbours::Memory { k, .. }, Some(mm)) => mm.neighbours(&items, k),
                    _ => None,
                };
                mem_s += tm.elapsed().as_secs_f64();
                let inb = match cfg.neighbours {
                    Neighbours::Batch { k } => Some(in_batch_neighbours(&items, k)),
                    _ => None,
                };
                let loss = phase.loss(
                    queries,
                    corpus,
                    &b,
                    &levels,
                    nb.as_ref().map(|(v, _)| (v, &items)),
                    inb.as_ref(),
                );
                let lv = f64::try_from(&loss).unwrap_or(f64::NAN);
                if !lv.is_finite() {
                    return Err(Error::NonFinite {
                        what: "loss",
                        stage: pi,
                        epoch,
                    });
                }
                for l in leaves.iter_mut() {
                    l.zero_grad();
                }
                loss.backward();
                if let Some(mm) = mem.as_mut() {
                    let tm = Instant::now();
                    mm.push(&items);
                    mem_s += tm.elapsed().as_secs_f64();
                }
                if !cfg.per_dim_heads {
                    let g = phase.params[0].0.grad();
                    let lo = g.narrow(0, 0, d_min.min(chain[0]) as i64);
                    let hi_rows = (2 * d_min).min(chain[0]) as i64 - d_min as i64;
                    g_lo += f64::try_from(lo.abs().mean(Kind::Double)).unwrap_or(0.0);
                    if hi_rows > 0 {
                        g_hi += f64::try_from(
                            g.narrow(0, d_min as i64, hi_rows).abs().mean(Kind::Double),
                        )
                        .unwrap_or(0.0);
                    }
                    g_var += f64::try_from(
                        g.narrow(0, 0, (2 * d_min).min(chain[0]) as i64)
                            .var(true)
                            .to_kind(Kind::Double),
                    )
                    .unwrap_or(0.0);
                }
                if !adam.grads_finite() {
                    return Err(Error::NonFinite {
                        what: "gradient",
                        stage: pi,
                        epoch,
                    });
                }
                adam.step(cfg.opts.lr);
                sum += lv;
                n += 1;
            }
            let val_loss = validate(&phase, queries, corpus, &va);
            let log = EpochLog {
                phase: pi,
                dims: chain.clone(),
                epoch,
                train_loss: sum / n.max(1) as f64,
                val_loss,
                grad_low: g_lo / n.max(1) as f64,
                grad_high: g_hi / n.max(1) as f64,
                grad_var: g_var / n.max(1) as f64,
                seconds: t0.elapsed().as_secs_f64(),
                memory_seconds: mem_s,
                steps: n,
            };
            progress(&log);
            history.push(log);
            if best.as_ref().is_none_or(|b| val_loss < b.0) {
                best = Some((val_loss, leaves.iter().map(|l| l.detach().copy()).collect()));
                since_best = 0;
            } else {
                since_best += 1;
                if cfg.sequential && since_best >= cfg.opts.patience {
                    break;
                }
            }
        }
        // restore the best epoch, write the phase's rows back, freeze them, reorder for ADS
        let (_, state) = best.expect("at least one epoch");
        tch::no_grad(|| {
            for (l, s) in leaves.iter().zip(&state) {
                l.detach().copy_(s);
            }
        });
        let levels = phase.levels(false);
        for (h, (w, b)) in heads.iter_mut().enumerate() {
            let (pw, pb) = &phase.params[h];
            let r = pw.size()[0];
            w.narrow(0, 0, r).copy_(&pw.detach());
            b.narrow(0, 0, r).copy_(&pb.detach());
        }
        if !phase.ads.is_empty() {
            // WARE of the base dims on every training (query, candidate) pair
            let (mut qa, mut da) = (Vec::new(), Vec::new());
            for (i, &q) in tr.q.iter().enumerate() {
                for d in tr.pos[i]
                    .iter()
                    .map(|p| p.0)
                    .chain(tr.neg[i].iter().copied())
                {
                    qa.push(q);
                    da.push(d);
                }
            }
            let w = tch::no_grad(|| {
                let za = phase.apply(
                    &queries.x.index_select(0, &Tensor::from_slice(&qa)),
                    &levels,
                    0,
                );
                let zb = phase.apply(
                    &corpus.x.index_select(0, &Tensor::from_slice(&da)),
                    &levels,
                    0,
                );
                crate::ads::ware(&za, &zb)
            });
            for (k, sel) in levels.iter().skip(1) {
                let idx: Vec<i64> =
                    Vec::try_from(&sel.as_ref().expect("ads").0).unwrap_or_default();
                let first: Vec<i64> = (0..*k as i64).collect();
                ware.push((
                    *k,
                    crate::ads::achievement_rate(&w, &idx),
                    crate::ads::achievement_rate(&w, &first),
                ));
            }
            let mut order: Vec<i64> = Vec::new();
            for (_, sel) in levels.iter().skip(1).rev() {
                let idx: Vec<i64> =
                    Vec::try_from(&sel.as_ref().expect("ads").0).unwrap_or_default();
                selections.push(idx.clone());
                for i in idx {
                    if !order.contains(&i) {
                        order.push(i);
                    }
                }
            }
            let rest: Vec<i64> = (0..rows).filter(|i| !order.contains(i)).collect();
            order.extend(rest);
            let perm = Tensor::from_slice(&order);
            let (w, b) = &mut heads[0];
            let nw = w.narrow(0, 0, rows).index_select(0, &perm);
            let nb = b.narrow(0, 0, rows).index_select(0, &perm);
            w.narrow(0, 0, rows).copy_(&nw);
            b.narrow(0, 0, rows).copy_(&nb);
        }
    }
    let heads = heads
        .into_iter()
        .enumerate()
        .map(|(h, (w, b))| {
            let dims = if cfg.per_dim_heads {
                vec![cfg.dims[h]]
            } else {
                cfg.dims.clone()
            };
            (w, b, dims)
        })
        .collect();
    Ok(Trained {
        heads,
        history,
        selections,
        ware,
    })
}
