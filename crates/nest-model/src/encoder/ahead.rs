//! Tokenising ahead ([`EncodeOptions::tokenize_ahead`]): on a GPU the next block of texts is
//! tokenised on a worker thread while the device runs the batches of this one.

use super::embed::BatchJob;
use super::transfer::Collected;
use super::{ElasticEncoder, EncodeOptions};
use crate::Result;

/// Texts per block when tokenising ahead ([`EncodeOptions::tokenize_ahead`]): this many
/// batches, so that a block's device work outlasts the next block's tokenising.
pub(super) const AHEAD_BATCHES: usize = 8;

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

    /// [`Self::embed_ids`] block by block of `block` texts, each block tokenised on a worker
    /// thread while the batches of the one before go to the device (one block ahead). Each
    /// block is length-sorted on its own, so the batches differ from one sort over every text
    /// (padding only: float reordering, 1e-6 on the CPU). A tokenizer error stops the encode.
    pub(super) fn embed_ahead(
        &self,
        texts: &[&str],
        job: &BatchJob,
        opts: EncodeOptions,
        block: usize,
        collected: &mut Collected,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<usize>> {
        let tokenizer = &self.tokenizer;
        let mut order = Vec::with_capacity(texts.len());
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            scope.spawn(move || {
                for part in texts.chunks(block) {
                    // a closed channel: the encode stopped (an error), so stop too
                    if tx.send(tokenizer.encode(part)).is_err() {
                        break;
                    }
                }
            });
            for ids in rx {
                let start = order.len();
                let ids = ids?;
                let mut seen = |k: usize| progress(start + k);
                let part = self.embed_ids(&ids, job, opts, collected, &mut seen);
                order.extend(part.into_iter().map(|i| start + i));
            }
            Ok(order)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    /// Tokenising ahead (blocks of 8 batches on a worker thread): the same vectors as one
    /// tokenisation of every text, in input order, up to the blocks' own length sort (1e-5),
    /// with the progress counted over every text.
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
        for (a, p) in ahead.iter().zip(&plain) {
            assert_eq!(a.size(), [53, enc.output_dim() as i64]);
            let diff = (a - p).abs().max().double_value(&[]);
            assert!(diff < 1e-5, "max |ahead - one tokenisation| {diff}");
        }
        // 4 blocks of at most 16 texts, batches of 2: counted across the blocks
        assert_eq!(seen.last(), Some(&53));
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert_eq!(seen.len(), 8 + 8 + 8 + 3);
    }
}
