//! Task families: what each evaluation protocol (STS, classification, pair classification,
//! retrieval) provides to the rest of nest-eval, through one trait ([`TaskFamily`]) and one
//! registry ([`FAMILIES`]).
//!
//! A family reads its data files ([`TaskFamily::read`], errors naming the file and line), names
//! its headline metric, turns its data into rows of the grid runner's text cache
//! ([`TaskData::rows`]), scores those rows at one (layer, dim, precision) cell
//! ([`Rows::score`]) and recomputes its main metric on a resample of the per-item scores
//! ([`TaskFamily::statistic`], what the paired significance tests resample). The grid runner,
//! the reports, the cost measurement and the comparisons iterate [`FAMILIES`] or ask
//! [`family`]; none matches on a family.
//!
//! A new family: its file here implementing [`TaskFamily`], [`TaskData`] and [`Rows`], one
//! line in [`FAMILIES`] (with its `mod` line), and its `TaskKind` and `TaskSource` variants in
//! `tasks.rs`.

use std::collections::BTreeMap;
use std::path::Path;

use nest_model::prompt::TaskPrompts;
use tch::Tensor;

use crate::items::Items;
use crate::quantize::Precision;
use crate::suite::space::{row_sim, space};
use crate::suite::texts::TextIndex;
use crate::suite::GridSpec;
use crate::tasks::{Task, TaskKind, TaskSource};
use crate::{Error, Result};

mod classification;
mod pair;
mod retrieval;
mod sts;

/// Every task family, in `TaskKind` order (the order of `--tasks` lists and report.md's family
/// averages).
pub(crate) static FAMILIES: [&dyn TaskFamily; 4] = [
    &sts::Sts,
    &classification::Classification,
    &pair::Pair,
    &retrieval::Retrieval,
];

/// The family of tasks of `kind`.
pub(crate) fn family(kind: TaskKind) -> &'static dyn TaskFamily {
    FAMILIES
        .iter()
        .copied()
        .find(|f| f.kind() == kind)
        .expect("every TaskKind has a line in FAMILIES")
}

/// What a family of tasks provides: its names, its data files, its headline metric and the
/// per-item statistic that significance tests resample.
pub(crate) trait TaskFamily: Sync {
    /// The kind `report.json` records for its tasks.
    fn kind(&self) -> TaskKind;
    /// Its name in `--tasks` and in reports.
    fn name(&self) -> &'static str;
    /// Other names `--tasks` accepts for it.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// The metric a cell is ranked by (x100 in reports), as MTEB's main score.
    fn main_metric(&self) -> &'static str;
    /// Whether `report.md` averages the family's tasks per cell (where it has two or more).
    fn averaged(&self) -> bool {
        true
    }
    /// Its default data under `root` (a `--data-root` in the layout of shared/datasets).
    fn default_sources(&self, root: &Path) -> Vec<TaskSource>;
    /// Reads and checks one task's files (errors name the file and line).
    fn read(&self, src: &TaskSource) -> Result<Task>;
    /// The main metric (x100) recomputed on the items `idx` (a resample, with repeats) from
    /// one cell's per-item scores and the task's gold (see [`crate::items`]).
    fn statistic(&self, gold: &[f32], items: &[f32], idx: &[usize]) -> f64;
    /// Whether the statistic needs a per-task gold vector beside the per-cell items.
    fn needs_gold(&self) -> bool {
        true
    }
}

/// A task's data, read and checked, as its family holds it.
pub(crate) trait TaskData: std::fmt::Debug + Send + Sync {
    /// The texts the encode latency is timed on, in order (the first ones are timed).
    fn timing_texts(&self) -> Vec<&str>;
    /// The task's rows as indices into the text cache (each text read with its side's prompt).
    fn rows(&self, index: &mut TextIndex, prompts: &TaskPrompts) -> Box<dyn Rows>;
}

/// A task's rows in the text cache, with their gold labels or scores.
pub(crate) trait Rows {
    /// The number of test items (pairs, test examples, queries).
    fn n_examples(&self) -> usize;
    /// The per-item gold a significance test needs beside the cells' items (see
    /// [`crate::items`]); `None` where the items alone suffice.
    fn gold(&self) -> Option<Items>;
    /// The metrics of one cell and each item's score.
    fn score(&self, at: &At) -> (BTreeMap<String, f64>, Items);
}

/// One (layer, dim, precision) cell: the cached pooled vectors of the cell's layer.
pub(crate) struct At<'a> {
    pub(crate) pooled: &'a Tensor,
    pub(crate) dim: usize,
    pub(crate) precision: Precision,
    pub(crate) grid: &'a GridSpec,
}

impl At<'_> {
    /// The cell's vectors of `rows`, quantised with ranges from `calib` (see `suite/space.rs`).
    pub(crate) fn space(&self, rows: &Tensor, calib: &Tensor) -> Tensor {
        space(
            self.pooled,
            rows,
            calib,
            self.dim,
            self.precision,
            self.grid,
        )
    }

    /// Each (a, b) row pair's similarity at the cell's precision, both sides quantised with
    /// ranges from all of their rows.
    pub(crate) fn pair_similarities(&self, a: &Tensor, b: &Tensor) -> Vec<f64> {
        let all = Tensor::cat(&[a, b], 0);
        row_sim(&self.space(a, &all), &self.space(b, &all), self.precision)
    }
}

/// Both sides of sentence pairs, as the pair families (STS, pair classification) time them:
/// every first and second sentence, in pair order.
pub(crate) fn pair_texts<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<&'a str> {
    pairs.flat_map(|(a, b)| [a, b]).collect()
}

/// Each side of sentence pairs as ids in the text cache, under the task's text prompt.
pub(crate) fn pair_ids<'a>(
    index: &mut TextIndex,
    prompts: &TaskPrompts,
    pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> (Tensor, Tensor) {
    let a = index.ids(&prompts.text, pairs.clone().map(|p| p.0));
    let b = index.ids(&prompts.text, pairs.map(|p| p.1));
    (a, b)
}

/// The error of a family handed another family's source (a bug, reported, not a panic).
pub(crate) fn wrong_source(f: &dyn TaskFamily, src: &TaskSource) -> Error {
    Error::Report(format!("the {} family cannot read {src:?}", f.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_family_in_kind_order() {
        let kinds: Vec<TaskKind> = FAMILIES.iter().map(|f| f.kind()).collect();
        let mut sorted = kinds.clone();
        sorted.sort();
        sorted.dedup();
        // report.md's family averages and `--tasks` lists follow this order
        assert_eq!(kinds, sorted);
        let names: Vec<&str> = FAMILIES.iter().map(|f| f.name()).collect();
        assert_eq!(names, ["sts", "cls", "pair", "retrieval"]);
        for f in FAMILIES {
            assert_eq!(family(f.kind()).name(), f.name());
            for src in f.default_sources(Path::new("/data")) {
                assert_eq!(src.kind(), f.kind(), "{src:?}");
            }
        }
    }

    #[test]
    fn a_family_names_its_aliases_and_refuses_another_source() {
        assert_eq!(
            TaskKind::parse_list("classification,pair-classification,sts").unwrap(),
            [TaskKind::Sts, TaskKind::Cls, TaskKind::Pair]
        );
        let e = family(TaskKind::Sts)
            .read(&TaskSource::Pair("x.tsv".into()))
            .unwrap_err();
        assert!(e.to_string().contains("sts family"), "{e}");
    }

    #[test]
    fn read_errors_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.tsv");
        std::fs::write(&p, "sentence1\tsentence2\tscore\na\tb\t1.0\nc\td\tlots\n").unwrap();
        let e = Task::load(&TaskSource::Sts(p.clone()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.tsv, line 3:") && e.contains("lots"), "{e}");
    }
}
