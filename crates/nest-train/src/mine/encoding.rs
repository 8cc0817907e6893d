//! The encoder at one (layer, dim) point as mining uses it: texts in fixed blocks, so a text's
//! vector is the same whichever process encodes it, gathered across a group.

use nest_model::prompt::TaskPrompts;
use nest_model::{ElasticEncoder, EncodeOptions};

use super::Bars;
use crate::Result;

/// The encoder at one point (inference: no dropout, no gradients).
pub struct Encoding<'m> {
    pub model: &'m ElasticEncoder,
    pub layer: usize,
    pub dim: usize,
    pub opts: EncodeOptions,
    /// The query and document prompts.
    pub prompts: TaskPrompts,
}

impl Encoding<'_> {
    /// Encodes `texts[range]` (with `prompt`) and hands each vector (`dim` coordinates, unit
    /// norm) to `f`, in order. Texts are encoded in blocks of `chunk` cut from `texts`' start
    /// (a range starting inside a block encodes the whole block and drops the vectors before
    /// it). Under `group`, block `b` is encoded by rank `b % world` and gathered: every rank
    /// hears every vector, in order (every rank must call it with the same arguments).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn blocks(
        &self,
        texts: &[String],
        range: std::ops::Range<usize>,
        chunk: usize,
        group: Option<&nest_dist::Group>,
        prompt: Option<&str>,
        what: &str,
        bars: Bars<'_>,
        f: &mut dyn FnMut(&[f32]) -> Result<()>,
    ) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        let pb = bars(range.len(), what);
        let (rank, world) = group.map_or((0, 1), |g| (g.rank(), g.world()));
        let (b0, b1) = (range.start / chunk, range.end.div_ceil(chunk));
        let block = |b: usize| b * chunk..((b + 1) * chunk).min(range.end);
        let mut give = |b: usize, flat: &[f32]| -> Result<()> {
            let skip = range.start.saturating_sub(b * chunk);
            for row in flat.chunks_exact(self.dim).skip(skip) {
                f(row)?;
            }
            pb.set_position((block(b).end - range.start) as u64);
            Ok(())
        };
        for round in (b0..b1).step_by(world) {
            let own = round + rank;
            let flat = match own < b1 {
                true => {
                    let base = block(own).start.saturating_sub(range.start);
                    self.encode(&texts[block(own)], prompt, &mut |done| {
                        pb.set_position((base + done) as u64)
                    })?
                }
                false => Vec::new(),
            };
            let Some(g) = group else {
                give(own, &flat)?;
                continue;
            };
            let mut padded = flat;
            padded.resize(chunk * self.dim, 0.0);
            let all = g.all_gather(&tch::Tensor::from_slice(&padded))?;
            for (r, t) in all.iter().enumerate() {
                let b = round + r;
                if b >= b1 {
                    break;
                }
                let v = nest_model::pooling::to_vec_f32(&t.narrow(
                    0,
                    0,
                    (block(b).len() * self.dim) as i64,
                ));
                give(b, &v)?;
            }
        }
        pb.finish_and_clear();
        Ok(())
    }

    /// One encoder call: `texts`' vectors, flat.
    fn encode(
        &self,
        texts: &[String],
        prompt: Option<&str>,
        tick: &mut dyn FnMut(usize),
    ) -> Result<Vec<f32>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let pooled = self
            .model
            .embed_prompted(&refs, &[self.layer], self.opts, prompt, tick)?;
        let e = nest_model::point::finish(&pooled[0], self.dim, None)?;
        Ok(nest_model::pooling::to_vec_f32(&e))
    }
}
