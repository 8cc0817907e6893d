//! Tokenising ahead ([`EncodeOptions::tokenize_ahead`]): on a GPU the next block of texts is
//! tokenised on a worker thread while the device runs the batches of this one.
//!
//! The device waits only for the first block, so blocks grow: one batch, two, four, then
//! [`AHEAD_BATCHES`] (the first batch's tokenising is the only part on the critical path where
//! the device is the slower side; fixed blocks of 8 batches kept most of a 2,758-text encode at
//! batch 256 before the device). Blocks are cut from the texts sorted by byte length (longest
//! first, as the batches go), a close stand-in for their token counts, so that a small block's
//! batches are as even as those of one sort by tokens; each block is then sorted by its tokens.

use std::cmp::Reverse;
use std::ops::Range;

use super::embed::BatchJob;
use super::phases::{timed, Phase};
use super::transfer::Collected;
use super::{ElasticEncoder, EncodeOptions};
use crate::Result;

/// The largest block, in batches: its device work outlasts the next block's tokenising.
pub(super) const AHEAD_BATCHES: usize = 8;

/// The blocks of `n` texts in batches of `batch`: 1, 2, 4, then [`AHEAD_BATCHES`] batches each
/// (ranges of positions in the encode's byte-length order; the last may be short).
pub(super) fn blocks(n: usize, batch: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut batches) = (0, 1);
    while start < n {
        let end = (start + batches * batch.max(1)).min(n);
        out.push(start..end);
        start = end;
        batches = (batches * 2).min(AHEAD_BATCHES);
    }
    out
}

/// Positions of `texts`, longest first by bytes: the order blocks are cut from.
fn by_bytes(texts: &[&str]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| Reverse(texts[i].len()));
    order
}

/// The blocks of `texts` that an encode at `batch` texts a batch tokenises ahead, in its
/// order: for timing the tokenizer as such an encode calls it (`nest bench encode`).
pub fn ahead_blocks<'t>(texts: &[&'t str], batch: usize) -> Vec<Vec<&'t str>> {
    let order = by_bytes(texts);
    let block = |r: Range<usize>| order[r].iter().map(|&i| texts[i]).collect();
    blocks(texts.len(), batch).into_iter().map(block).collect()
}

impl ElasticEncoder {
    /// Whether [`EncodeOptions::tokenize_ahead`] applies.
    pub(super) fn tokenize_ahead(&self, opts: EncodeOptions) -> bool {
        let wanted = match std::env::var("NEST_TOKENIZE_AHEAD").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => opts.tokenize_ahead.unwrap_or(self.device().is_cuda()),
        };
        wanted && opts.streams <= 1
    }

    /// [`Self::embed_ids`] block by block ([`blocks`] of the texts in byte-length order), each
    /// block tokenised on a worker thread while the batches of the one before go to the device
    /// (one block ahead). Each block is length-sorted on its own, so the batches may differ
    /// from one sort over every text (padding only: float reordering, 1e-6 on the CPU). Returns
    /// the order the vectors went in (`order[pos]` = the index in `texts` of the `pos`-th). A
    /// tokenizer error stops the encode.
    pub(super) fn embed_ahead(
        &self,
        texts: &[&str],
        job: &BatchJob,
        opts: EncodeOptions,
        collected: &mut Collected,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<usize>> {
        let tokenizer = &self.tokenizer;
        let by_bytes = &by_bytes(texts);
        let blocks = blocks(texts.len(), opts.batch_size);
        let mut order = Vec::with_capacity(texts.len());
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            let todo = blocks.clone();
            scope.spawn(move || {
                for r in todo {
                    let part: Vec<&str> = by_bytes[r].iter().map(|&i| texts[i]).collect();
                    // a closed channel: the encode stopped (an error), so stop too
                    if tx.send(tokenizer.encode(&part)).is_err() {
                        break;
                    }
                }
            });
            let mut rx = rx.into_iter();
            for r in blocks {
                let Some(ids) = timed(Phase::Tokens, || rx.next()) else {
                    break;
                };
                let ids = ids?;
                let mut seen = |k: usize| progress(r.start + k);
                let part = self.embed_ids(&ids, job, opts, collected, &mut seen)?;
                order.extend(part.into_iter().map(|k| by_bytes[r.start + k]));
            }
            Ok(order)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// Tokenising ahead (growing blocks on a worker thread), eagerly and through recorded
    /// passes: the same vectors as one tokenisation of every text, in input order, up to the
    /// blocks' own length sort (1e-5), with the progress counted over every text.
    #[test]
    fn tokenizing_ahead_gives_the_same_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let spec = crate::tiny::TinySpec::new(crate::config::Architecture::Bert);
        crate::tiny::write_tiny_model(dir.path(), &spec).unwrap();
        let enc = ElasticEncoder::load(dir.path(), Device::Cpu, None).unwrap();
        const W: [&str; 6] = ["the", "cat", "sat", "on", "a", "mat"];
        let texts: Vec<String> = (0..53)
            .map(|i| {
                (0..1 + i % 11)
                    .map(|k| W[(i + k) % 6])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let opts = |ahead| EncodeOptions {
            batch_size: 2,
            tokenize_ahead: Some(ahead),
            ..EncodeOptions::default()
        };
        let mut seen = Vec::new();
        let ahead = enc
            .embed_layers(&refs, &[1, 2], opts(true), &mut |d| seen.push(d))
            .unwrap();
        let plain = enc
            .embed_layers(&refs, &[1, 2], opts(false), &mut |_| {})
            .unwrap();
        // as on a GPU: ahead and through recorded passes (the CPU fake)
        let recorded = EncodeOptions {
            graphs: crate::graph::GraphMode::On,
            ..opts(true)
        };
        let graphed = enc
            .embed_layers(&refs, &[1, 2], recorded, &mut |_| {})
            .unwrap();
        for ((a, g), p) in ahead.iter().zip(&graphed).zip(&plain) {
            assert_eq!(a.size(), [53, enc.output_dim() as i64]);
            let diff = (a - p).abs().max().double_value(&[]);
            assert!(diff < 1e-5, "max |ahead - one tokenisation| {diff}");
            let diff = (g - p).abs().max().double_value(&[]);
            assert!(
                diff < 1e-5,
                "max |ahead, recorded - one tokenisation| {diff}"
            );
        }
        // blocks of 1, 2, 4, 8, 8, 4 batches of 2 texts: counted across the blocks
        assert_eq!(seen.last(), Some(&53));
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert_eq!(seen.len(), 1 + 2 + 4 + 8 + 8 + 4);
    }

    /// Blocks grow from one batch to [`AHEAD_BATCHES`] and cover every text once.
    #[test]
    fn blocks_grow_to_eight_batches() {
        let b = blocks(2758, 256);
        let sizes: Vec<usize> = b.iter().map(|r| r.len()).collect();
        assert_eq!(sizes, [256, 512, 1024, 966]);
        assert_eq!(blocks(53, 2).iter().map(|r| r.len()).sum::<usize>(), 53);
        let sizes: Vec<usize> = blocks(100, 4).iter().map(|r| r.len()).collect();
        assert_eq!(sizes, [4, 8, 16, 32, 32, 8]);
        assert!(b.windows(2).all(|w| w[0].end == w[1].start) && b[0].start == 0);
        assert!(blocks(0, 32).is_empty());
        assert_eq!(blocks(5, 0), [0..1, 1..3, 3..5]);
    }
}
