//! Hard-negative mining without tensors: sentence-transformers 6.2.0's `mine_hard_negatives`
//! over vectors scored as the index scores them (a [`MemoryLevel`](crate::MemoryLevel) at any precision and dim, or
//! an index's stored level).
//!
//! - [`set`]: the queries, the deduplicated corpus and each query's positives;
//! - [`select`]: the options, the rank window and the choice of each query's negatives (ranges,
//!   margins, score bounds, top or seeded random sampling);
//! - [`rows`]: the output formats (triplet, n-tuple, labeled-pair, labeled-list);
//! - [`output`]: the chunked, resumable output file;
//! - [`overlap`]: how far two mined files agree;
//! - [`corpus`]: what is searched: a [`MemoryLevel`](crate::MemoryLevel) or an index's stored level
//!   ([`IndexCorpus`]), behind [`Candidates`];
//! - [`source`]: which model and point an index was built at, checked before mining through it.
//!
//! `nest mine` (nest-cli) encodes the texts and composes these.

pub mod corpus;
pub mod output;
pub mod overlap;
pub mod rows;
pub mod select;
pub mod set;
pub mod source;

pub use corpus::{Candidates, IndexCorpus};
pub use output::ResumableOutput;
pub use overlap::Overlap;
pub use rows::{write_rows, OutputFormat, QueryRows};
pub use select::{sample, select, MineOptions, Picked, Sampling, Skipped, Window};
pub use set::MineSet;

use crate::level::Prepared;

/// One query's result: its positives' scores and its negatives.
#[derive(Debug, Clone, PartialEq)]
pub struct Mined {
    pub positive_scores: Vec<f32>,
    pub picked: Picked,
}

/// Mines `queries` (prepared for `corpus`'s level), which are the set's queries `first..`:
/// retrieves `window.retrieve` candidates each, scores the positives the same way, selects.
pub fn mine_queries<C: Candidates + ?Sized>(
    corpus: &C,
    queries: &[Prepared],
    first: usize,
    positives: &[Vec<u32>],
    o: &MineOptions,
    window: Window,
) -> Vec<Mined> {
    let top = corpus.top(queries, window.retrieve);
    top.iter()
        .zip(queries)
        .enumerate()
        .map(|(i, (cands, q))| {
            let pos = &positives[first + i];
            let positive_scores: Vec<f32> =
                pos.iter().map(|&r| corpus.score(q, r as usize)).collect();
            let picked = select(o, window, first + i, cands, pos, &positive_scores);
            Mined {
                positive_scores,
                picked,
            }
        })
        .collect()
}

/// Counts over a run, for the summary sentence-transformers prints.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub queries: usize,
    /// Queries that got fewer than `num_negatives`.
    pub short: usize,
    pub negatives: usize,
    pub positive_score_sum: f64,
    pub positives: usize,
    pub negative_score_sum: f64,
    pub skipped: Skipped,
}

impl Summary {
    pub fn add(&mut self, m: &Mined, num_negatives: usize) {
        self.queries += 1;
        self.short += usize::from(m.picked.negatives.len() < num_negatives);
        self.negatives += m.picked.negatives.len();
        self.negative_score_sum += m.picked.negatives.iter().map(|n| n.1 as f64).sum::<f64>();
        self.positives += m.positive_scores.len();
        self.positive_score_sum += m.positive_scores.iter().map(|&s| s as f64).sum::<f64>();
        self.skipped.add(m.picked.skipped);
    }

    /// sentence-transformers' closing statistics, over every query mined, a line each
    /// (`drops_short`: the output leaves out the queries short of `num_negatives`, an
    /// n-tuple's fixed width).
    pub fn report(&self, num_negatives: usize, drops_short: bool) -> Vec<String> {
        let mean = |sum: f64, n: usize| if n == 0 { f64::NAN } else { sum / n as f64 };
        let mut out = vec![format!(
            "mined for queries {}: positives {} (mean score {:.4}), negatives {} (mean score \
             {:.4})",
            self.queries,
            self.positives,
            mean(self.positive_score_sum, self.positives),
            self.negatives,
            mean(self.negative_score_sum, self.negatives)
        )];
        let k = &self.skipped;
        for (what, n) in [
            ("absolute margin", k.absolute_margin),
            ("relative margin", k.relative_margin),
            ("max score", k.max_score),
            ("min score", k.min_score),
        ] {
            if n > 0 {
                out.push(format!("skipped {n} candidates for the {what}"));
            }
        }
        if self.short > 0 {
            // (the figures above counted them while the file did not hold them: trial E)
            let left_out = match drops_short {
                true => {
                    " (the n-tuple output leaves those queries out: the figures above count them)"
                }
                false => "",
            };
            out.push(format!(
                "could not find {num_negatives} negatives for {} of {} queries ({:.2}%){left_out}; \
                 consider --range-max, --range-min, the margins or --max-score",
                self.short,
                self.queries,
                100.0 * self.short as f64 / self.queries.max(1) as f64
            ));
        }
        out
    }
}
