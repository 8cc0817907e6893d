//! The epoch plan: seeded shuffle, length-aware batching, no duplicate texts within a batch and
//! a weighted mixture of sources ([`epoch_plan`]), and the padding a plan costs ([`padding`]).

use std::collections::HashSet;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::source::Source;

/// One batch: examples of one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub source: usize,
    pub examples: Vec<usize>,
}

fn rng(seed: u64, epoch: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    r.set_stream(stream);
    r
}

/// Batches of one source for one epoch.
fn source_batches(
    src: &Source,
    si: usize,
    bs: usize,
    seed: u64,
    epoch: u64,
    length_batching: bool,
    no_dup: bool,
) -> Vec<Batch> {
    let mut r = rng(seed, epoch, si as u64 + 1);
    let mut idx: Vec<usize> = (0..src.len()).collect();
    idx.shuffle(&mut r);
    if length_batching {
        // sort within mega-batches of 50 batches: similar lengths share a batch, order stays random
        for chunk in idx.chunks_mut(50 * bs) {
            chunk.sort_by_key(|&i| std::cmp::Reverse(src.length(i)));
        }
    }
    let mut batches = Vec::new();
    let mut pending: std::collections::VecDeque<usize> = idx.into_iter().collect();
    let mut deferred: Vec<usize> = Vec::new();
    while !pending.is_empty() || !deferred.is_empty() {
        let mut batch = Vec::with_capacity(bs);
        let mut seen: HashSet<&str> = HashSet::new();
        let mut retry: Vec<usize> = std::mem::take(&mut deferred);
        retry.extend(pending.drain(..pending.len().min(bs)));
        let mut queue: std::collections::VecDeque<usize> = retry.into();
        while let Some(i) = queue.pop_front() {
            if batch.len() == bs {
                deferred.push(i);
                continue;
            }
            let texts = &src.texts[i];
            if no_dup && texts.iter().any(|t| seen.contains(t.as_str())) {
                deferred.push(i);
                continue;
            }
            seen.extend(texts.iter().map(String::as_str));
            batch.push(i);
            if queue.is_empty() && batch.len() < bs {
                if let Some(next) = pending.pop_front() {
                    queue.push_back(next);
                }
            }
        }
        if batch.len() < 2 {
            break; // a lone example (or only duplicates left) cannot form in-batch negatives
        }
        batches.push(Batch {
            source: si,
            examples: batch,
        });
    }
    batches.shuffle(&mut r);
    batches
}

/// The batches of epoch `epoch` over all sources, in training order. Deterministic in
/// `(seed, epoch)`, so a resumed run rebuilds the same plan and skips to its position.
///
/// Mixture: each source gets a share of the epoch's batches proportional to its weight (its own
/// batches cycled if it needs more than it has), and the shares are shuffled together.
pub(crate) fn epoch_plan(
    sources: &[Source],
    bs: usize,
    seed: u64,
    epoch: u64,
    length_batching: bool,
    no_dup: bool,
) -> Vec<Batch> {
    let per: Vec<Vec<Batch>> = sources
        .iter()
        .enumerate()
        .map(|(si, s)| source_batches(s, si, bs, seed, epoch, length_batching, no_dup))
        .collect();
    if per.len() == 1 {
        return per.into_iter().next().unwrap_or_default();
    }
    let total: usize = per.iter().map(Vec::len).sum();
    let wsum: f64 = sources.iter().map(|s| s.spec.weight).sum();
    let mut plan = Vec::with_capacity(total);
    for (s, batches) in sources.iter().zip(&per) {
        let share = ((s.spec.weight / wsum) * total as f64).round() as usize;
        if batches.is_empty() {
            continue;
        }
        plan.extend((0..share).map(|k| batches[k % batches.len()].clone()));
    }
    plan.shuffle(&mut rng(seed, epoch, 0));
    plan
}

/// Padding of a plan, every column padded to its batch's longest.
pub(crate) fn padding(sources: &[Source], plan: &[Batch]) -> Padding {
    let mut p = Padding::default();
    for b in plan {
        let s = &sources[b.source];
        for c in 0..s.columns() {
            let lens: Vec<usize> = b.examples.iter().map(|&i| s.ids[i][c].len()).collect();
            p.real_tokens += lens.iter().sum::<usize>();
            p.padded_tokens += lens.iter().max().unwrap_or(&0) * lens.len();
        }
    }
    p
}

/// Tokens of a batch plan: those of the texts and those the padded batches hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Padding {
    real_tokens: usize,
    pub padded_tokens: usize,
}

impl Padding {
    /// The share of the padded tokens that are padding, in percent.
    pub(crate) fn percent(&self) -> f64 {
        100.0 * (1.0 - self.real_tokens as f64 / self.padded_tokens.max(1) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::{DataFormat, DataSource};

    fn source(texts: Vec<Vec<&str>>, weight: f64) -> Source {
        let ids = texts
            .iter()
            .map(|r| r.iter().map(|t| vec![0i64; t.len()]).collect())
            .collect();
        Source {
            spec: DataSource {
                path: "x".into(),
                format: DataFormat::Pairs,
                made_by: None,
                prompts: vec![],
                weight,
            },
            texts: texts
                .iter()
                .map(|r| r.iter().map(|t| t.to_string()).collect())
                .collect(),
            ids,
            scores: vec![],
            prompt_tokens: vec![],
        }
    }

    #[test]
    fn plans_are_seeded_complete_and_duplicate_free() {
        let rows: Vec<Vec<String>> = (0..100)
            .map(|i| vec![format!("a{}", i % 40), format!("b{i}")])
            .collect();
        let s = source(
            rows.iter()
                .map(|r| r.iter().map(String::as_str).collect())
                .collect(),
            1.0,
        );
        let p1 = epoch_plan(std::slice::from_ref(&s), 8, 1, 0, true, true);
        assert_eq!(
            p1,
            epoch_plan(std::slice::from_ref(&s), 8, 1, 0, true, true)
        );
        assert_ne!(
            p1,
            epoch_plan(std::slice::from_ref(&s), 8, 1, 1, true, true)
        );
        let mut all: Vec<usize> = p1.iter().flat_map(|b| b.examples.clone()).collect();
        all.sort_unstable();
        all.dedup();
        assert!(
            all.len() >= 96,
            "almost every example is used: {}",
            all.len()
        );
        for b in &p1 {
            let mut t: Vec<&str> = b
                .examples
                .iter()
                .flat_map(|&i| s.texts[i].iter().map(String::as_str))
                .collect();
            let n = t.len();
            t.sort_unstable();
            t.dedup();
            assert_eq!(t.len(), n, "duplicate text in a batch");
        }
    }

    #[test]
    fn length_batching_cuts_padding_and_mixture_follows_weights() {
        let texts: Vec<Vec<String>> = (0..400)
            .map(|i| vec!["x".repeat(1 + (i * 37) % 60), format!("y{i}")])
            .collect();
        let s = source(
            texts
                .iter()
                .map(|r| r.iter().map(String::as_str).collect())
                .collect(),
            3.0,
        );
        let sorted = epoch_plan(std::slice::from_ref(&s), 16, 7, 0, true, false);
        let random = epoch_plan(std::slice::from_ref(&s), 16, 7, 0, false, false);
        let (a, b) = (
            padding(std::slice::from_ref(&s), &sorted),
            padding(std::slice::from_ref(&s), &random),
        );
        let (p1, p2) = (a.padded_tokens, b.padded_tokens);
        assert_eq!(a.real_tokens, b.real_tokens);
        assert!(p1 < p2, "length batching pads less: {p1} vs {p2}");
        let t: Vec<Vec<String>> = (0..400)
            .map(|i| vec![format!("t{i}"), format!("u{i}")])
            .collect();
        let s2 = source(
            t.iter()
                .map(|r| r.iter().map(String::as_str).collect())
                .collect(),
            1.0,
        );
        let mix = epoch_plan(&[s, s2], 16, 7, 0, true, true);
        let from0 = mix.iter().filter(|b| b.source == 0).count() as f64 / mix.len() as f64;
        assert!((from0 - 0.75).abs() < 0.03, "weights 3:1 give {from0}");
    }
}
