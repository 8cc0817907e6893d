//! A recipe's `[mine]` table: mine hard negatives with the model being trained, before the
//! first epoch and again every `every_epochs` epochs, and train on them (docs/MINING.md, "Mine
//! and train in one recipe"). The keys are `nest mine`'s flags, underscored, with its defaults
//! (sentence-transformers' `mine_hard_negatives`); `trainer/mining.rs` runs the rounds.

use std::path::PathBuf;

use nest_index::mine::{MineOptions, OutputFormat, Sampling};
use nest_index::Precision;
use serde::{Deserialize, Serialize};

/// The `[mine]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MineSpec {
    /// (query, positive) pairs: `.jsonl` (`anchor`/`query`, `positive`/`answer`) or a TSV
    /// whose header names such columns.
    pub(crate) queries: PathBuf,
    /// Candidate negatives (`.jsonl` with `text`, or one text per line); unset = the positives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) corpus: Option<PathBuf>,
    #[serde(default = "d_negatives")]
    pub(crate) num_negatives: usize,
    #[serde(default)]
    pub(crate) range_min: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) range_max: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) min_score: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_score: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) absolute_margin: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) relative_margin: Option<f32>,
    /// `top` or `random` (a seeded draw from the window).
    #[serde(default = "d_sampling")]
    pub(crate) sampling: String,
    /// `random`'s seed.
    #[serde(default)]
    pub(crate) seed: u64,
    /// `triplet`: one (anchor, positive, negative) row per negative; `n-tuple`: one (anchor,
    /// positive, negative_1..n) row per positive, for queries with all `num_negatives` found
    /// (MNRL then scores every negative of the batch). Both are what `format = "triplets"`
    /// reads; the labeled layouts are not training layouts.
    #[serde(default = "d_format")]
    pub(crate) output_format: String,
    /// The point the texts are encoded at: an exit (unset = all layers) and a prefix (unset =
    /// the model's default dim), stored and scored at `precision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) layer: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) dim: Option<usize>,
    #[serde(default = "d_precision")]
    pub(crate) precision: String,
    /// Texts per forward pass while mining.
    #[serde(default = "d_batch")]
    pub(crate) batch_size: usize,
    /// Sampling weight of the mined source among `[[data]]`'s.
    #[serde(default = "d_weight")]
    pub(crate) weight: f64,
    /// 0: mine once, before the first epoch; N: mine again with the current model before every
    /// N-th epoch (epochs N, 2N, ...).
    #[serde(default)]
    pub(crate) every_epochs: usize,
}

fn d_negatives() -> usize {
    3
}
fn d_sampling() -> String {
    "top".into()
}
fn d_format() -> String {
    "triplet".into()
}
fn d_precision() -> String {
    "float32".into()
}
fn d_batch() -> usize {
    32
}
fn d_weight() -> f64 {
    1.0
}

/// `nest mine`'s flag names as this table's keys.
fn keyed(message: &str) -> String {
    let mut m = message.to_string();
    for flag in [
        "--num-negatives",
        "--range-min",
        "--range-max",
        "--min-score",
        "--max-score",
        "--absolute-margin",
        "--relative-margin",
        "--sampling",
        "--output-format",
    ] {
        m = m.replace(flag, &format!("mine.{}", flag[2..].replace('-', "_")));
    }
    m
}

impl MineSpec {
    /// The selection settings (checked by [`MineSpec::validate`]).
    pub(crate) fn options(&self) -> MineOptions {
        MineOptions {
            num_negatives: self.num_negatives,
            range_min: self.range_min,
            range_max: self.range_max,
            min_score: self.min_score,
            max_score: self.max_score,
            absolute_margin: self.absolute_margin,
            relative_margin: self.relative_margin,
            sampling: Sampling::parse(&self.sampling).unwrap_or(Sampling::Top),
            include_positives: false,
            seed: self.seed,
        }
    }

    /// The mined rows' layout (checked by [`Self::validate`]).
    pub(crate) fn format(&self) -> nest_index::Result<OutputFormat> {
        OutputFormat::parse(&self.output_format)
    }

    pub(crate) fn precision(&self) -> Precision {
        Precision::parse(&self.precision).unwrap_or(Precision::Float32)
    }

    /// Value checks before anything is read: every error names its `mine.` key.
    pub(crate) fn validate(&self) -> std::result::Result<(), String> {
        Sampling::parse(&self.sampling).map_err(|e| keyed(&e.to_string()))?;
        match self.format().map_err(|e| keyed(&e.to_string()))? {
            OutputFormat::Triplet | OutputFormat::NTuple => {}
            f => {
                return Err(format!(
                    "mine.output_format: '{}' rows are not a training layout; the trainer \
                     reads \"triplet\" (one anchor, positive, negative row per negative) or \
                     \"n-tuple\" (anchor, positive, negative_1..n)",
                    f.name()
                ))
            }
        }
        Precision::parse(&self.precision)
            .map_err(|e| e.to_string().replacen("precision", "mine.precision", 1))?;
        // the window's checks that need no data (one positive per query assumed here; the
        // mined set's own count is checked when it is read)
        self.options()
            .window(1)
            .map_err(|e| keyed(&e.to_string()))?;
        for (key, v) in [
            ("mine.layer", self.layer),
            ("mine.dim", self.dim),
            ("mine.batch_size", Some(self.batch_size)),
        ] {
            if v == Some(0) {
                return Err(format!("{key} must be at least 1, got 0"));
            }
        }
        if !(self.weight > 0.0 && self.weight.is_finite()) {
            return Err(format!("mine.weight must be > 0, got {}", self.weight));
        }
        Ok(())
    }

    /// The round whose mined tuples epoch `epoch` trains on.
    pub(crate) fn round_of(&self, epoch: usize) -> usize {
        epoch.checked_div(self.every_epochs).unwrap_or(0)
    }

    /// The first epoch of round `round`.
    pub(crate) fn first_epoch(&self, round: usize) -> usize {
        round * self.every_epochs
    }
}
