//! The training engine's state across phases ([`Engine`]): one phase of nested dims, its
//! epochs, each batch's loss and gradient statistics, and after an ADS phase the reordering
//! that nests the chosen dims by prefix.

use std::time::Instant;

use rand::seq::SliceRandom;
use tch::{Kind, Tensor};

use crate::ads::Ads;
use crate::config::{Neighbours, TrainConfig};
use crate::data::Embeddings;
use crate::memory::Memory;
use crate::phase::{batch, in_batch_neighbours, validate, Phase, Split};
use crate::trained::{EpochLog, Trained};
use crate::{Error, Result};
use nest_model::optim::AdamW;

/// What stays across phases: the data, the S-XBM memory, the shuffling RNG and the step count
/// (each step re-seeds libtorch with `seed + step`).
pub(super) struct Engine<'a> {
    pub(super) cfg: &'a TrainConfig,
    pub(super) corpus: &'a Embeddings,
    pub(super) queries: &'a Embeddings,
    pub(super) tr: Split,
    pub(super) va: Split,
    pub(super) mem: Option<Memory>,
    pub(super) rng: rand_chacha::ChaCha8Rng,
    pub(super) step_no: u64,
    pub(super) d_min: usize,
}

/// The sums an epoch's steps accumulate.
#[derive(Default)]
struct EpochSums {
    loss: f64,
    steps: usize,
    memory_seconds: f64,
    grad_low: f64,
    grad_high: f64,
    grad_var: f64,
}

impl<'a> Engine<'a> {
    /// One phase over `chain`: its trainable rows (copied from `heads`), epochs until the epoch
    /// budget or (sequential, when set) `patience` epochs without a better validation loss, the best
    /// epoch's state restored.
    pub(super) fn phase(
        &mut self,
        pi: usize,
        chain: &[usize],
        heads: &[(Tensor, Tensor)],
        history: &mut Vec<EpochLog>,
        progress: &mut dyn FnMut(&EpochLog),
    ) -> Result<Phase<'a>> {
        let cfg = self.cfg;
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
                .map(|&k| Ads {
                    soft: cfg.opts.ads_soft,
                    ..Ads::new(chain[0], k, tau)
                })
                .collect(),
            _ => Vec::new(),
        };
        let phase = Phase {
            cfg,
            chain: chain.to_vec(),
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
            let log = self.epoch(&phase, &mut leaves, &mut adam, pi, epoch)?;
            let val_loss = log.val_loss;
            progress(&log);
            history.push(log);
            if best.as_ref().is_none_or(|b| val_loss < b.0) {
                best = Some((val_loss, leaves.iter().map(|l| l.detach().copy()).collect()));
                since_best = 0;
            } else {
                since_best += 1;
                if cfg.sequential && cfg.opts.patience.is_some_and(|p| since_best >= p) {
                    break;
                }
            }
        }
        let (_, state) = best.expect("at least one epoch");
        tch::no_grad(|| {
            for (l, s) in leaves.iter().zip(&state) {
                l.detach().copy_(s);
            }
        });
        Ok(phase)
    }

    /// One epoch of `phase`: shuffled batches, each a loss, backward and Adam step (a
    /// non-finite loss or gradient stops the run), then the validation loss.
    fn epoch(
        &mut self,
        phase: &Phase,
        leaves: &mut [Tensor],
        adam: &mut AdamW,
        pi: usize,
        epoch: usize,
    ) -> Result<EpochLog> {
        let t0 = Instant::now();
        let mut order: Vec<usize> = (0..self.tr.q.len()).collect();
        order.shuffle(&mut self.rng);
        let mut sums = EpochSums::default();
        for members in order.chunks(self.cfg.opts.batch_size) {
            tch::manual_seed((self.cfg.opts.seed + self.step_no) as i64);
            self.step_no += 1;
            let loss = self.batch_loss(phase, members, &mut sums);
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
            if let Some(mm) = self.mem.as_mut() {
                let tm = Instant::now();
                mm.push(&loss_items(self.queries, self.corpus, &self.tr, members));
                sums.memory_seconds += tm.elapsed().as_secs_f64();
            }
            if !self.cfg.per_dim_heads {
                self.gradient_stats(phase, &mut sums);
            }
            if !adam.grads_finite() {
                return Err(Error::NonFinite {
                    what: "gradient",
                    stage: pi,
                    epoch,
                });
            }
            adam.step(self.cfg.opts.lr)?;
            sums.loss += lv;
            sums.steps += 1;
        }
        let n = sums.steps.max(1) as f64;
        Ok(EpochLog {
            phase: pi,
            dims: phase.chain.clone(),
            epoch,
            train_loss: sums.loss / n,
            val_loss: validate(phase, self.queries, self.corpus, &self.va),
            grad_low: sums.grad_low / n,
            grad_high: sums.grad_high / n,
            grad_var: sums.grad_var / n,
            seconds: t0.elapsed().as_secs_f64(),
            memory_seconds: sums.memory_seconds,
            steps: sums.steps,
        })
    }

    /// The loss of one batch (eq. 9 over the phase's levels), with S-XBM or in-batch neighbours.
    fn batch_loss(&self, phase: &Phase, members: &[usize], sums: &mut EpochSums) -> Tensor {
        let b = batch(&self.tr, members);
        let levels = phase.levels(true);
        let items = loss_items(self.queries, self.corpus, &self.tr, members);
        let tm = Instant::now();
        let nb = match (self.cfg.neighbours, self.mem.as_ref()) {
            (Neighbours::Memory { k, .. }, Some(mm)) => mm.neighbours(&items, k),
            _ => None,
        };
        sums.memory_seconds += tm.elapsed().as_secs_f64();
        let inb = match self.cfg.neighbours {
            Neighbours::Batch { k } => Some(in_batch_neighbours(&items, k)),
            _ => None,
        };
        phase.loss(
            self.queries,
            self.corpus,
            &b,
            &levels,
            nb.as_ref().map(|(v, _)| (v, &items)),
            inb.as_ref(),
        )
    }

    /// SMEC Figures 6a and 7: mean |gradient| of `W`'s rows `[0, d_min)` and
    /// `[d_min, 2 d_min)`, and the variance over those rows' entries.
    fn gradient_stats(&self, phase: &Phase, sums: &mut EpochSums) {
        let (d_min, top) = (self.d_min, phase.chain[0]);
        let g = phase.params[0].0.grad();
        let lo = g.narrow(0, 0, d_min.min(top) as i64);
        let hi_rows = (2 * d_min).min(top) as i64 - d_min as i64;
        sums.grad_low += f64::try_from(lo.abs().mean(Kind::Double)).unwrap_or(0.0);
        if hi_rows > 0 {
            sums.grad_high +=
                f64::try_from(g.narrow(0, d_min as i64, hi_rows).abs().mean(Kind::Double))
                    .unwrap_or(0.0);
        }
        let rows = g.narrow(0, 0, (2 * d_min).min(top) as i64);
        sums.grad_var += f64::try_from(rows.var(true).to_kind(Kind::Double)).unwrap_or(0.0);
    }

    /// After an ADS phase: the achievement rates of its choices against the WARE ranking of the
    /// base dims (SMEC Table 2), then the chosen dims moved to the front of `head`, so that the
    /// exported map is nested by prefix.
    pub(super) fn ads_reorder(
        &self,
        phase: &Phase,
        head: &mut (Tensor, Tensor),
        out: &mut Trained,
    ) -> Result<()> {
        let levels = phase.levels(false);
        let rows = phase.chain[0] as i64;
        // WARE of the base dims on every training (query, candidate) pair
        let (mut qa, mut da) = (Vec::new(), Vec::new());
        for (i, &q) in self.tr.q.iter().enumerate() {
            let candidates = self.tr.pos[i].iter().map(|p| p.0);
            for d in candidates.chain(self.tr.neg[i].iter().copied()) {
                qa.push(q);
                da.push(d);
            }
        }
        let w = tch::no_grad(|| {
            let rows_of = |e: &Embeddings, ix: &[i64]| e.x.index_select(0, &Tensor::from_slice(ix));
            let za = phase.apply(&rows_of(self.queries, &qa), &levels, 0);
            let zb = phase.apply(&rows_of(self.corpus, &da), &levels, 0);
            crate::ads::ware(&za, &zb)
        });
        let chosen = |sel: &Option<(Tensor, Tensor)>| -> Vec<i64> {
            sel.as_ref()
                .and_then(|s| Vec::try_from(&s.0).ok())
                .unwrap_or_default()
        };
        for (k, sel) in levels.iter().skip(1) {
            let first: Vec<i64> = (0..*k as i64).collect();
            out.ware.push((
                *k,
                crate::ads::achievement_rate(&w, &chosen(sel)),
                crate::ads::achievement_rate(&w, &first),
            ));
        }
        let mut order: Vec<i64> = Vec::new();
        for (_, sel) in levels.iter().skip(1).rev() {
            let idx = chosen(sel);
            out.selections.push(idx.clone());
            for i in idx {
                if !order.contains(&i) {
                    order.push(i);
                }
            }
        }
        let rest: Vec<i64> = (0..rows).filter(|i| !order.contains(i)).collect();
        order.extend(rest);
        let perm = Tensor::from_slice(&order);
        let (w, b) = head;
        let nw = w.narrow(0, 0, rows).index_select(0, &perm);
        let nb = b.narrow(0, 0, rows).index_select(0, &perm);
        w.narrow(0, 0, rows).copy_(&nw);
        b.narrow(0, 0, rows).copy_(&nb);
        Ok(())
    }
}

/// A batch's queries and candidate documents stacked (the items whose neighbours the loss
/// and the S-XBM memory use).
fn loss_items(queries: &Embeddings, corpus: &Embeddings, tr: &Split, members: &[usize]) -> Tensor {
    let b = batch(tr, members);
    Tensor::cat(
        &[
            queries.x.index_select(0, &Tensor::from_slice(&b.0)),
            corpus.x.index_select(0, &Tensor::from_slice(&b.1)),
        ],
        0,
    )
}
