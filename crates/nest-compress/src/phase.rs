//! One phase of adaptor training: the batches (queries, positives, mined hard negatives), the
//! levels of a nested chain (truncation or ADS), the loss of eq. 9 on a batch, validation, and
//! the optimiser step.

use tch::{Kind, Tensor};

use crate::ads::Ads;
use crate::config::TrainConfig;
use crate::data::{Embeddings, Qrels};
use crate::loss::{cos_matrix, cos_rows, pairwise_gap, rank_loss, similarity_gap};

/// Queries of one split with their positive documents and mined hard negatives (row indices).
pub(crate) struct Split {
    pub(crate) q: Vec<i64>,
    pub(crate) pos: Vec<Vec<(i64, f64)>>,
    pub(crate) neg: Vec<Vec<i64>>,
}

pub(crate) fn prepare(
    qrels: &Qrels,
    queries: &Embeddings,
    corpus: &Embeddings,
    hard: usize,
) -> Split {
    let (qi, ci) = (queries.index(), corpus.index());
    let mut s = Split {
        q: vec![],
        pos: vec![],
        neg: vec![],
    };
    for (qid, rel) in qrels {
        s.q.push(qi[qid.as_str()]);
        s.pos.push(
            rel.iter()
                .map(|(d, &r)| (ci[d.as_str()], r as f64))
                .collect(),
        );
    }
    let qx = queries.x.index_select(0, &Tensor::from_slice(&s.q));
    let top = cos_matrix(&qx, &corpus.x)
        // a corpus smaller than the candidates asked for gives what it has (it panicked)
        .topk((hard + 8).min(corpus.ids.len()) as i64, 1, true, true)
        .1;
    for (i, pos) in s.pos.iter().enumerate() {
        let row: Vec<i64> = Vec::try_from(top.get(i as i64)).unwrap_or_default();
        s.neg.push(
            row.into_iter()
                .filter(|d| !pos.iter().any(|p| p.0 == *d))
                .take(hard)
                .collect(),
        );
    }
    s
}

/// A batch: query rows, candidate doc rows and the relevance matrix `[B, C]`.
pub(crate) fn batch(s: &Split, members: &[usize]) -> (Vec<i64>, Vec<i64>, Tensor) {
    let mut cands: Vec<i64> = Vec::new();
    for &m in members {
        cands.extend(s.pos[m].iter().map(|p| p.0));
        cands.extend(&s.neg[m]);
    }
    cands.sort_unstable();
    cands.dedup();
    let mut rel = vec![0f32; members.len() * cands.len()];
    for (bi, &m) in members.iter().enumerate() {
        for &(d, r) in &s.pos[m] {
            let c = cands.binary_search(&d).expect("candidate");
            rel[bi * cands.len() + c] = r as f32;
        }
    }
    let q = members.iter().map(|&m| s.q[m]).collect();
    let rel = Tensor::from_slice(&rel).view([members.len() as i64, cands.len() as i64]);
    (q, cands, rel)
}

/// One step's view of the levels: for each level, its dim and (ADS) chosen columns + weights.
pub(crate) type Levels = Vec<(usize, Option<(Tensor, Tensor)>)>;

pub(crate) struct Phase<'a> {
    pub(crate) cfg: &'a TrainConfig,
    pub(crate) chain: Vec<usize>,
    /// Trainable rows of this phase: per head `(W, b)`.
    pub(crate) params: Vec<(Tensor, Tensor)>,
    pub(crate) ads: Vec<Ads>,
}

impl Phase<'_> {
    /// Levels for a training step (`train`: Gumbel draws) or for evaluation.
    pub(crate) fn levels(&self, train: bool) -> Levels {
        let mut out: Levels = vec![(self.chain[0], None)];
        let mut allowed: Option<Tensor> = None;
        for (t, a) in self.ads.iter().enumerate() {
            let (idx, w) = if train {
                a.sample(allowed.as_ref())
            } else {
                let i = a.select(allowed.as_ref());
                let n = i.size()[0];
                (i, Tensor::ones([n], (Kind::Float, tch::Device::Cpu)))
            };
            allowed = Some(idx.shallow_clone());
            out.push((self.chain[t + 1], Some((idx, w))));
        }
        if self.ads.is_empty() {
            out.extend(self.chain[1..].iter().map(|&d| (d, None)));
        }
        out
    }

    /// The level-`t` vectors of `x [N, D]` (any leading dims).
    pub(crate) fn apply(&self, x: &Tensor, levels: &Levels, t: usize) -> Tensor {
        let (d, sel) = &levels[t];
        let head = if self.cfg.per_dim_heads { t } else { 0 };
        let (w, b) = &self.params[head];
        let y = x.matmul(&w.tr()) + b;
        match sel {
            Some((idx, wt)) => y.index_select(-1, idx) * wt,
            None => y.narrow(-1, 0, *d as i64),
        }
    }

    /// The phase's loss on one batch.
    // `a = a + b`, not `a += b`: an in-place add would modify tensors autograd still reads
    #[allow(clippy::assign_op_pattern)]
    pub(crate) fn loss(
        &self,
        x: &Embeddings,
        c: &Embeddings,
        b: &(Vec<i64>, Vec<i64>, Tensor),
        levels: &Levels,
        mem: Option<(&Tensor, &Tensor)>,
        inbatch: Option<&Tensor>,
    ) -> Tensor {
        let q = x.x.index_select(0, &Tensor::from_slice(&b.0));
        let d = c.x.index_select(0, &Tensor::from_slice(&b.1));
        let mut total = Tensor::zeros([], (Kind::Float, tch::Device::Cpu));
        let items = Tensor::cat(&[&q, &d], 0);
        // the frozen side of eq. 7 does not depend on the level: once per batch
        let frozen_mem = mem.map(|(vecs, it)| cos_rows(&it.unsqueeze(1).expand_as(vecs), vecs));
        let frozen_nb = inbatch.map(|nb| cos_matrix(&items, &items).gather(1, nb, false));
        for t in 0..levels.len() {
            let mut l = rank_loss(
                &self.apply(&q, levels, t),
                &self.apply(&d, levels, t),
                &b.2,
                self.cfg.opts.scale,
            );
            if self.cfg.alpha > 0.0 {
                let ci = self.apply(&items, levels, t);
                if let (Some((vecs, _)), Some(frozen)) = (mem, &frozen_mem) {
                    // eq. 7 against the items' S-XBM neighbours
                    let cv = self.apply(vecs, levels, t);
                    let comp = cos_rows(&ci.unsqueeze(1).expand_as(&cv), &cv);
                    l = l + similarity_gap(frozen, &comp) * self.cfg.alpha;
                }
                if let (Some(nb), Some(s0)) = (inbatch, &frozen_nb) {
                    let s1 = cos_matrix(&ci, &ci).gather(1, nb, false);
                    l = l + similarity_gap(s0, &s1) * self.cfg.alpha;
                }
                if self.cfg.pairwise {
                    l = l + pairwise_gap(&items, &ci) * self.cfg.alpha;
                }
            }
            total = total + l;
        }
        total
    }
}

pub(crate) fn in_batch_neighbours(items: &Tensor, k: usize) -> Tensor {
    let n = items.size()[0];
    let s = cos_matrix(items, items) - Tensor::eye(n, (Kind::Float, tch::Device::Cpu)) * 4.0;
    s.topk(k.min(n as usize - 1) as i64, 1, true, true).1
}

/// Trains an adaptor on `corpus` / `queries` embeddings (L2-normalised by the caller) with
/// `train` qrels, choosing and stopping on `val` qrels.
/// The phase's rank loss on the validation queries (ADS at its inference choice, no noise).
pub(crate) fn validate(
    phase: &Phase,
    queries: &Embeddings,
    corpus: &Embeddings,
    va: &Split,
) -> f64 {
    tch::no_grad(|| {
        let levels = phase.levels(false);
        let idx: Vec<usize> = (0..va.q.len()).collect();
        let (mut sum, mut n) = (0.0, 0.0);
        for members in idx.chunks(phase.cfg.opts.batch_size) {
            let b = batch(va, members);
            let q = queries.x.index_select(0, &Tensor::from_slice(&b.0));
            let d = corpus.x.index_select(0, &Tensor::from_slice(&b.1));
            for t in 0..levels.len() {
                let l = rank_loss(
                    &phase.apply(&q, &levels, t),
                    &phase.apply(&d, &levels, t),
                    &b.2,
                    phase.cfg.opts.scale,
                );
                sum += f64::try_from(l).unwrap_or(f64::NAN) * members.len() as f64;
            }
            n += members.len() as f64;
        }
        sum / n.max(1.0)
    })
}
