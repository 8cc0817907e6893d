//! The host's share of `nest bench encode`'s passes: when the host had queued every batch and
//! where its time went ([`Pass`]), the tokeniser's time alone, and a pass under the profiler.
//! On a fast device the host's share is what no layer count shortens (early exit's ceiling).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use nest_model::encoder::phases::{measure, Phases};

/// What an encode returns.
type Encoded<T> = nest_model::Result<T>;

/// One timed pass: its seconds, when the host had queued its last batch (seconds from the
/// start), and the host's phases.
pub(super) struct Pass {
    pub(super) took: f64,
    queued: f64,
    phases: Phases,
}

impl Default for Pass {
    fn default() -> Pass {
        Pass {
            took: f64::INFINITY,
            queued: 0.0,
            phases: Phases::default(),
        }
    }
}

impl Pass {
    /// Times `encode`, which reports its progress after each batch.
    pub(super) fn time<T>(
        encode: impl FnOnce(&mut dyn FnMut(usize)) -> Encoded<T>,
    ) -> Result<Pass> {
        let t = Instant::now();
        let mut queued = 0.0;
        let (done, phases) = measure(|| encode(&mut |_| queued = t.elapsed().as_secs_f64()));
        done?;
        Ok(Pass {
            took: t.elapsed().as_secs_f64(),
            queued,
            phases,
        })
    }

    /// Prints the split between the host's work and the device's (on a GPU: where the host is
    /// the longer part, fewer layers cannot shorten the pass) and the host's phases.
    pub(super) fn print(&self, what: &str) {
        eprintln!(
            "  {what}: the host had queued every batch at {:.1} ms of the pass's {:.1} ms \
             (after that: waiting for the device, then the vectors' finish)",
            self.queued * 1e3,
            self.took * 1e3
        );
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let p = &self.phases;
        eprintln!(
            "  {what}: the host's phases: {:.1} ms waiting for tokens, {} batches queued in \
             {:.1} ms ({:.0} us each), {:.1} ms finishing (waiting for the device, \
             reordering, normalising, the copy down)",
            ms(p.tokens),
            p.batch_count,
            ms(p.batches),
            ms(p.batches) * 1e3 / p.batch_count.max(1) as f64,
            ms(p.finish)
        );
        // the tokens, when every batch was shaped on this thread (one stream: a GPU's encode)
        if p.counted_batches == p.batch_count && p.padded_tokens > 0 {
            eprintln!(
                "  {what}: the batches' tokens: {} real in {} padded ({:.1}% padding)",
                p.real_tokens,
                p.padded_tokens,
                100.0 * (1.0 - p.real_tokens as f64 / p.padded_tokens as f64)
            );
        }
    }
}

/// One more pass of `layer` under libtorch's profiler, its trace written to
/// `dir/<run>-layer<layer>.json` (the word cache as the timed passes left it).
pub(super) fn profile_pass(
    model: &nest_model::ElasticEncoder,
    run: &str,
    dir: &Path,
    layer: usize,
    pass: &dyn Fn() -> nest_model::Result<nest_core::output::Matrix>,
) -> Result<()> {
    let name: String = run
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let path = dir.join(format!("{name}-layer{layer}.json"));
    let cuda = model.device().is_cuda();
    nest_model::profile::trace(&path, cuda, pass)??;
    eprintln!(
        "  {run} layer {layer}: profiler trace in {}",
        path.display()
    );
    Ok(())
}

/// Prints the time tokenising `texts` takes (best of `repeats`): through the tokenizers
/// library alone, and where the model's tokenizer keeps words' ids, with none kept (cold), in
/// the blocks an encode at `batch` texts a batch tokenises ahead on a GPU (cold; the first
/// block is what the device waits for) and with these texts' words kept (warm).
pub(super) fn print_tokenising(
    model: &nest_model::ElasticEncoder,
    run: &str,
    texts: &[&str],
    batch: usize,
    repeats: usize,
) -> Result<()> {
    let tok = &model.tokenizer;
    let best = |f: &dyn Fn() -> Result<()>| -> Result<f64> {
        let mut best = f64::INFINITY;
        for _ in 0..repeats {
            let t = Instant::now();
            f()?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        Ok(best * 1e3)
    };
    let direct = best(&|| Ok(tok.encode_direct(texts).map(drop)?))?;
    let mut line = format!("tokenizers library {direct:.1} ms");
    if let Some(words) = tok.word_cache() {
        let cold = best(&|| {
            words.clear();
            Ok(tok.encode(texts).map(drop)?)
        })?;
        let blocks = nest_model::encoder::ahead_blocks(texts, batch);
        let first = best(&|| {
            words.clear();
            Ok(tok.encode(&blocks[0]).map(drop)?)
        })?;
        let in_blocks = best(&|| {
            words.clear();
            blocks.iter().try_for_each(|b| Ok(tok.encode(b).map(drop)?))
        })?;
        let warm = best(&|| Ok(tok.encode(texts).map(drop)?))?;
        let _ = write!(
            line,
            ", words cached cold {cold:.1} ms (in the {} blocks an encode tokenises ahead: \
             {in_blocks:.1} ms, the first of {} texts {first:.1} ms), warm {warm:.1} ms \
             ({} words)",
            blocks.len(),
            blocks[0].len(),
            words.len()
        );
    }
    eprintln!(
        "  {run}: tokenising the {} sentences alone: {line} (best of {repeats}, {} threads)",
        texts.len(),
        nest_model::tokenize::words::threads()
    );
    Ok(())
}
