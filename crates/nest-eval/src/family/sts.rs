//! STS: Spearman x100 of the cosine similarity of each sentence pair against its gold score
//! (STS-B test and SICK-R test by default).

use std::collections::BTreeMap;
use std::path::Path;

use nest_core::data::{read_sts, StsPair};
use nest_model::prompt::TaskPrompts;
use tch::Tensor;

use super::{pair_ids, pair_texts, wrong_source, At, Rows, TaskData, TaskFamily};
use crate::items::Items;
use crate::metrics::{pearson, spearman};
use crate::suite::texts::TextIndex;
use crate::tasks::{task_name, Task, TaskKind, TaskSource};
use crate::Result;

/// The STS family.
pub(crate) struct Sts;

impl TaskFamily for Sts {
    fn kind(&self) -> TaskKind {
        TaskKind::Sts
    }

    fn name(&self) -> &'static str {
        "sts"
    }

    fn main_metric(&self) -> &'static str {
        "spearman"
    }

    fn default_sources(&self, root: &Path) -> Vec<TaskSource> {
        vec![
            TaskSource::Sts(root.join("stsb/test.tsv")),
            TaskSource::Sts(root.join("sick-r/test.tsv")),
        ]
    }

    fn read(&self, src: &TaskSource) -> Result<Task> {
        let TaskSource::Sts(p) = src else {
            return Err(wrong_source(self, src));
        };
        let pairs = read_sts(p)?;
        // a correlation needs two pairs and scores that vary: its cells are NaN otherwise (the
        // run still finishes, issue 23), and the task's warning says why
        let first = pairs.first().map(|x| x.score);
        let degenerate = pairs.len() < 2 || pairs.iter().all(|x| Some(x.score) == first);
        let warnings = match (degenerate, pairs.len()) {
            (false, _) => vec![],
            (true, n) if n < 2 => vec![format!(
                "{}: {n} pair: a Spearman correlation needs two or more (its cells are NaN)",
                p.display()
            )],
            (true, n) => vec![format!(
                "{}: all {n} gold scores are equal: a Spearman correlation is undefined (its \
                 cells are NaN)",
                p.display()
            )],
        };
        Ok(Task {
            name: task_name(p),
            kind: TaskKind::Sts,
            files: vec![p.clone()],
            data: Box::new(StsData(pairs)),
            warnings,
        })
    }

    fn statistic(&self, gold: &[f32], items: &[f32], idx: &[usize]) -> f64 {
        let pick = |v: &[f32]| -> Vec<f64> { idx.iter().map(|&i| v[i] as f64).collect() };
        100.0 * spearman(&pick(items), &pick(gold))
    }
}

/// An STS task's pairs.
#[derive(Debug)]
struct StsData(Vec<StsPair>);

impl StsData {
    fn sides(&self) -> impl Iterator<Item = (&str, &str)> + Clone {
        self.0
            .iter()
            .map(|x| (x.sentence1.as_str(), x.sentence2.as_str()))
    }
}

impl TaskData for StsData {
    fn timing_texts(&self) -> Vec<&str> {
        pair_texts(self.sides())
    }

    fn rows(&self, index: &mut TextIndex, prompts: &TaskPrompts) -> Box<dyn Rows> {
        let p = &self.0;
        let (a, b) = pair_ids(index, prompts, self.sides());
        Box::new(StsRows {
            a,
            b,
            gold: p.iter().map(|x| x.score).collect(),
        })
    }
}

/// Each pair's two sides in the text cache and its gold score.
struct StsRows {
    a: Tensor,
    b: Tensor,
    gold: Vec<f64>,
}

impl Rows for StsRows {
    fn n_examples(&self) -> usize {
        self.gold.len()
    }

    fn gold(&self) -> Option<Items> {
        Some(Items::from_f64(&self.gold))
    }

    /// Spearman and Pearson x100; each pair's similarity.
    fn score(&self, at: &At) -> (BTreeMap<String, f64>, Items) {
        let cos = at.pair_similarities(&self.a, &self.b);
        let mut m = BTreeMap::new();
        m.insert("spearman".into(), 100.0 * spearman(&cos, &self.gold));
        m.insert("pearson".into(), 100.0 * pearson(&cos, &self.gold));
        (m, Items::from_f64(&cos))
    }
}
