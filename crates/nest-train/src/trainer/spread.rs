//! A micro-batch spread over processes (data parallelism on c10d) and/or over GradCache chunks.
//!
//! Both change *where* the encoder runs, never *what* is computed: the objective still scores
//! the whole global batch and the gradients are the plain batch's.
//!
//! - **Data parallel.** Every rank reads the same global batch from the same epoch plan and
//!   encodes its slice. The pooled vectors of every layer are all-gathered; the local slice
//!   stays attached to the graph, the other ranks' slices are detached; every rank computes the
//!   same global loss. The gradient reaching the encoder on rank `r` is the global loss's
//!   gradient through slice `r`, so their sum over ranks ([`super::sync::sync_gradients`]) is
//!   the gradient of the global loss. The objective's own parameters see the whole batch on
//!   every rank and are averaged instead.
//! - **GradCache** (Gao et al. 2021, "Scaling Deep Contrastive Learning Batch Size under Memory
//!   Limited Setup", arXiv:2101.06983, section 3.2): encode the slice chunk by chunk without a
//!   graph; score the batch with the pooled vectors as leaves; keep their gradients; re-run each
//!   chunk with the same dropout seed and back-propagate `sum(v * cached_grad)`.
//!
//! Objectives that read token states or attention ([`Objective::reads_tokens`]) cannot be
//! spread; [`Spread::check`] refuses them before any data is read.

use nest_dist::Group;
use nest_model::{ElasticEncoder, Head};
use tch::Tensor;

use super::graphed_chunks::ChunkGraphs;
use super::step::{assemble, encode_column, micro_step, score, targets, MicroResult};
use crate::data::{Batch, Source};
use crate::objective::{Column, Objective, PooledLayer, StepContext};
use crate::recipe::LossKind;
use crate::{Error, Result};

/// How micro-batches are spread.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Spread<'g> {
    /// The process group of a data-parallel run (absent: one process).
    pub(crate) group: Option<&'g Group>,
    /// GradCache chunk size (the recipe's `mini_batch_size`; absent: whole slices).
    pub(crate) chunk: Option<usize>,
}

impl Spread<'_> {
    /// Whether micro-batches run as they always did (one process, no chunks).
    fn is_plain(&self) -> bool {
        self.group.is_none() && self.chunk.is_none()
    }

    fn rank_world(&self) -> (usize, usize) {
        self.group.map_or((0, 1), |g| (g.rank(), g.world()))
    }

    /// Refuses what cannot be spread: a global batch the world size does not divide, an
    /// objective that reads token states.
    pub(crate) fn check(&self, batch_size: usize, objective: &dyn Objective) -> Result<()> {
        let recipe_err = |message: String| Error::Recipe {
            source_name: "recipe".into(),
            message,
        };
        let (_, world) = self.rank_world();
        #[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; MSRV is 1.86
        if batch_size % world != 0 {
            return Err(recipe_err(format!(
                "batch_size {batch_size} is the global batch and must split evenly over \
                 WORLD_SIZE {world} processes"
            )));
        }
        if self.is_plain() {
            return Ok(());
        }
        if let Some(why) = objective.reads_tokens() {
            let what = match (self.group.is_some(), self.chunk.is_some()) {
                (true, true) => "data-parallel training with mini_batch_size",
                (true, false) => "data-parallel training",
                _ => "mini_batch_size (GradCache)",
            };
            return Err(recipe_err(format!(
                "{what} hands the objective pooled vectors only, and this objective cannot \
                 use them: {why}"
            )));
        }
        Ok(())
    }
}

/// The examples of rank `rank` out of `world` in a batch of `n`: balanced contiguous slices.
fn slice(n: usize, rank: usize, world: usize) -> std::ops::Range<usize> {
    n * rank / world..n * (rank + 1) / world
}

/// The libtorch seed of one chunk: the plain path's `seed + micro_batch` on rank 0's first
/// chunk, distinct (and reproducible) for every other rank and chunk.
fn chunk_seed(ctx: &StepContext, rank: usize, chunk: usize) -> i64 {
    let base = ctx.seed.wrapping_add(ctx.micro_batch);
    let mix = (rank as u64) << 40 | chunk as u64;
    base.wrapping_add(mix.wrapping_mul(0x9e37_79b9_7f4a_7c15)) as i64
}

/// One column's pooled stacks: every layer's vectors (`[L+1, b, hidden]`) and the same through
/// the head (`[L+1, b, output_dim]`, or `None` without one).
pub(crate) type Pooled = (Tensor, Option<Tensor>);

/// Every layer's pooled vectors of one column, stacked (see [`Pooled`]).
pub(crate) fn pooled_stack(col: &Column) -> Pooled {
    let layers = col.hidden.len();
    let raw: Vec<Tensor> = (0..layers).map(|l| col.pooled_raw(l)).collect();
    let raw = Tensor::stack(&raw, 0);
    let out = (!col.head.is_empty()).then(|| col.head.forward(&raw));
    (raw, out)
}

/// `examples` ordered by their tokens over the columns read (stable: ties keep batch order).
fn by_length(src: &Source, cols: &[usize], examples: &[usize]) -> Vec<usize> {
    let mut v = examples.to_vec();
    v.sort_by_key(|&i| cols.iter().map(|&c| src.ids[i][c].len()).sum::<usize>());
    v
}

/// Which source column each encoded column reads (SimCSE: the same texts twice).
pub(crate) fn column_sources(src: &Source, loss: LossKind) -> Vec<usize> {
    if loss == LossKind::Simcse {
        vec![0, 0]
    } else {
        (0..src.columns()).collect()
    }
}

/// What encoding a slice needs besides the examples: the model, the data, which source column
/// each encoded column reads, dropout on or off.
pub(crate) struct Encoding<'a> {
    pub(crate) enc: &'a ElasticEncoder,
    pub(crate) src: &'a Source,
    pub(crate) cols: &'a [usize],
    pub(crate) train: bool,
}

/// Encodes this rank's slice chunk by chunk: per column, the stacked pooled vectors of the
/// slice (with a graph unless `leaves`, in which case they come back as fresh leaves).
fn encode_slice(
    e: &Encoding,
    examples: &[usize],
    chunk: usize,
    seed: impl Fn(usize) -> i64,
    leaves: bool,
) -> Vec<Pooled> {
    let Encoding {
        enc,
        src,
        cols,
        train,
    } = *e;
    let mut parts: Vec<Vec<Pooled>> = cols.iter().map(|_| Vec::new()).collect();
    for (k, ex) in examples.chunks(chunk.max(1)).enumerate() {
        tch::manual_seed(seed(k));
        let b = Batch {
            source: 0,
            examples: ex.to_vec(),
        };
        for (c, &sc) in cols.iter().enumerate() {
            let run = || {
                let col = encode_column(enc, src, &b, sc, train, nest_model::ClsAttention::None);
                pooled_stack(&col)
            };
            parts[c].push(if leaves { tch::no_grad(run) } else { run() });
        }
    }
    parts
        .into_iter()
        .map(|p| {
            let raw = Tensor::cat(
                &p.iter().map(|x| x.0.shallow_clone()).collect::<Vec<_>>(),
                1,
            );
            let out = p[0].1.is_some().then(|| {
                Tensor::cat(
                    &p.iter()
                        .map(|x| {
                            x.1.as_ref()
                                .expect("every chunk has the head")
                                .shallow_clone()
                        })
                        .collect::<Vec<_>>(),
                    1,
                )
            });
            if leaves {
                (
                    raw.detach().set_requires_grad(true),
                    out.map(|o| o.detach().set_requires_grad(true)),
                )
            } else {
                (raw, out)
            }
        })
        .collect()
}

/// The global batch's stack from every rank's slice: the local slice as given (attached), the
/// others as received (detached). One all-gather for all of a column's tensors.
///
/// # Shapes
/// - `local`: `[L+1, n_local, w]` each; returns `[L+1, n, w]` each
fn gather(g: &Group, local: &[Tensor], n: usize) -> Result<Vec<Tensor>> {
    let world = g.world();
    let most = n.div_ceil(world) as i64;
    let widths: Vec<i64> = local.iter().map(|t| t.size()[2]).collect();
    let packed = Tensor::cat(&local.iter().map(Tensor::detach).collect::<Vec<_>>(), 2);
    let have = packed.size()[1];
    let packed = if have < most {
        let s = packed.size();
        let pad = Tensor::zeros([s[0], most - have, s[2]], (packed.kind(), packed.device()));
        Tensor::cat(&[packed, pad], 1)
    } else {
        packed
    };
    let parts = g.all_gather(&packed).map_err(Error::from)?;
    let mut out = Vec::with_capacity(local.len());
    let mut at = 0;
    for (t, &w) in local.iter().zip(&widths) {
        let pieces: Vec<Tensor> = (0..world)
            .map(|r| {
                if r == g.rank() {
                    t.shallow_clone()
                } else {
                    let len = slice(n, r, world).len() as i64;
                    parts[r].narrow(2, at, w).narrow(1, 0, len)
                }
            })
            .collect();
        out.push(Tensor::cat(&pieces, 1));
        at += w;
    }
    Ok(out)
}

/// Turns a column's stacks into the per-layer vectors an objective reads.
fn pooled_column(enc: &ElasticEncoder, raw: &Tensor, out: Option<&Tensor>) -> Column {
    let layers = raw.size()[0];
    Column {
        hidden: Vec::new(),
        mask: Tensor::new(),
        pooling: enc.pooling,
        head: Head::default(),
        cls_attention: Vec::new(),
        pooled: (0..layers)
            .map(|l| PooledLayer {
                raw: raw.get(l),
                out: out.unwrap_or(raw).get(l),
            })
            .collect(),
    }
}

/// One micro-batch, spread (a plain [`micro_step`] when `spread` is plain): see the module
/// docs. The loss and terms are the global batch's (the same on every rank); the caller syncs
/// gradients once per optimizer step. With `chunks` (and GradCache), the chunk passes go
/// through recorded graphs ([`ChunkGraphs`]).
// long: the five phases of a spread step (slice, encode, gather, score, replay) in order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spread_micro_step(
    enc: &ElasticEncoder,
    objective: &dyn Objective,
    src: &Source,
    b: &Batch,
    loss: LossKind,
    ctx: &StepContext,
    grad_accum: usize,
    spread: &Spread,
    train: bool,
    chunks: Option<&mut ChunkGraphs>,
) -> Result<MicroResult> {
    if spread.is_plain() {
        return Ok(micro_step(enc, objective, src, b, loss, ctx, grad_accum));
    }
    let (rank, world) = spread.rank_world();
    let n = b.examples.len();
    let cols = column_sources(src, loss);
    let cached = spread.chunk.is_some();
    // GradCache chunks pad to their longest text: sort each rank's slice by length first (the
    // losses do not depend on the order of a batch's rows; every rank derives every slice's
    // order, so all agree on the global order)
    let examples: Vec<usize> = if cached {
        (0..world)
            .flat_map(|r| by_length(src, &cols, &b.examples[slice(n, r, world)]))
            .collect()
    } else {
        b.examples.clone()
    };
    let local = &examples[slice(n, rank, world)];
    let chunk = spread.chunk.unwrap_or(local.len());
    let seed = |k: usize| chunk_seed(ctx, rank, k);
    let encoding = Encoding {
        enc,
        src,
        cols: &cols,
        train,
    };
    let mut chunks = chunks.filter(|g| cached && g.applies(enc.device()));
    let mine = match chunks.as_deref_mut() {
        Some(g) => g.encode(&encoding, local, chunk, &seed, &mut |k, ex| {
            encode_slice(&encoding, ex, ex.len(), |_| seed(k), true)
        })?,
        None => encode_slice(&encoding, local, chunk, seed, cached),
    };
    let mut columns = Vec::with_capacity(cols.len());
    for (raw, out) in &mine {
        let (raw, out) = match spread.group {
            Some(g) => {
                let mut ts = vec![raw.shallow_clone()];
                ts.extend(out.as_ref().map(Tensor::shallow_clone));
                let mut all = gather(g, &ts, n)?.into_iter();
                (all.next().expect("raw"), all.next())
            }
            None => (raw.shallow_clone(), out.as_ref().map(Tensor::shallow_clone)),
        };
        columns.push(pooled_column(enc, &raw, out.as_ref()));
    }
    // the rows are `examples` (length-sorted under GradCache), not the batch's order
    let mut out = assemble(enc, src, &examples, columns);
    out.targets = targets(objective, src, &examples).map(|t| t.to_device(enc.device()));
    // objectives' own random draws (e.g. a randomised SVD) must agree on every rank
    tch::manual_seed(ctx.seed.wrapping_add(ctx.micro_batch) as i64);
    let (res, finite) = score(objective, &out, ctx, grad_accum);
    if cached && finite {
        match chunks {
            Some(g) => {
                let grads = leaf_grads(&mine);
                g.backward(&encoding, local, chunk, &seed, &mine, &mut |k, ex, at| {
                    replay_chunk(&encoding, ex, at, seed(k), &grads)
                })?
            }
            None => replay(&encoding, local, chunk, seed, &mine),
        }
    }
    Ok(res)
}

/// GradCache's second pass: each chunk again, same seed, with a graph; back-propagates the
/// leaves' cached gradients through it.
fn replay(
    e: &Encoding,
    local: &[usize],
    chunk: usize,
    seed: impl Fn(usize) -> i64,
    leaves: &[Pooled],
) {
    let grads = leaf_grads(leaves);
    for (k, ex) in local.chunks(chunk.max(1)).enumerate() {
        replay_chunk(e, ex, (k * chunk) as i64, seed(k), &grads);
    }
}

/// The leaves' gradients after the objective's backward (undefined where it did not read one).
fn leaf_grads(leaves: &[Pooled]) -> Vec<Pooled> {
    leaves
        .iter()
        .map(|(r, o)| (r.grad(), o.as_ref().map(Tensor::grad)))
        .collect()
}

/// One chunk of the second pass: rows `at..` of the batch, encoded again after `seed`.
fn replay_chunk(e: &Encoding, ex: &[usize], at: i64, seed: i64, grads: &[Pooled]) {
    let len = ex.len() as i64;
    let again = encode_slice(e, ex, ex.len(), |_| seed, false);
    let mut surrogate: Option<Tensor> = None;
    let mut add = |v: &Tensor, g: &Tensor| {
        if g.defined() {
            let s = (v * g.narrow(1, at, len)).sum(v.kind());
            surrogate = Some(match surrogate.take() {
                Some(acc) => acc + s,
                None => s,
            });
        }
    };
    for ((raw, out), (g_raw, g_out)) in again.iter().zip(grads) {
        add(raw, g_raw);
        if let (Some(o), Some(g)) = (out, g_out) {
            add(o, g);
        }
    }
    if let Some(s) = surrogate {
        s.backward();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_batch_once() {
        for n in [2, 7, 32] {
            for world in 1..5 {
                let mut all: Vec<usize> = (0..world).flat_map(|r| slice(n, r, world)).collect();
                all.dedup();
                assert_eq!(all, (0..n).collect::<Vec<_>>());
            }
        }
    }
}
