//! Pair classification: whether each sentence pair is a paraphrase (MRPC), the same sense
//! (WiC) or an entailment (SICK-E), scored by the cosine similarity's average precision x100.

use std::collections::BTreeMap;
use std::path::Path;

use nest_core::data::{read_pairs, LabelledPair};
use nest_model::prompt::TaskPrompts;
use tch::Tensor;

use super::{pair_ids, pair_texts, wrong_source, At, Rows, TaskData, TaskFamily};
use crate::items::Items;
use crate::metrics::pair::{average_precision, pair_scores};
use crate::suite::texts::TextIndex;
use crate::tasks::{task_name, Task, TaskKind, TaskSource};
use crate::Result;

/// The pair classification family.
pub(crate) struct Pair;

impl TaskFamily for Pair {
    fn kind(&self) -> TaskKind {
        TaskKind::Pair
    }

    fn name(&self) -> &'static str {
        "pair"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["pair-classification"]
    }

    fn main_metric(&self) -> &'static str {
        "ap"
    }

    fn default_sources(&self, root: &Path) -> Vec<TaskSource> {
        ["mrpc", "wic", "sick-e"]
            .iter()
            .map(|d| TaskSource::Pair(root.join(d).join("test.tsv")))
            .collect()
    }

    fn read(&self, src: &TaskSource) -> Result<Task> {
        let TaskSource::Pair(p) = src else {
            return Err(wrong_source(self, src));
        };
        Ok(Task {
            name: task_name(p),
            kind: TaskKind::Pair,
            files: vec![p.clone()],
            data: Box::new(PairData(read_pairs(p)?)),
            warnings: vec![],
        })
    }

    fn statistic(&self, gold: &[f32], items: &[f32], idx: &[usize]) -> f64 {
        let sims: Vec<f64> = idx.iter().map(|&i| items[i] as f64).collect();
        let labels: Vec<bool> = idx.iter().map(|&i| gold[i] > 0.5).collect();
        100.0 * average_precision(&sims, &labels)
    }
}

/// A pair classification task's labelled pairs.
#[derive(Debug)]
struct PairData(Vec<LabelledPair>);

impl PairData {
    fn sides(&self) -> impl Iterator<Item = (&str, &str)> + Clone {
        self.0
            .iter()
            .map(|x| (x.sentence1.as_str(), x.sentence2.as_str()))
    }
}

impl TaskData for PairData {
    fn timing_texts(&self) -> Vec<&str> {
        pair_texts(self.sides())
    }

    fn rows(&self, index: &mut TextIndex, prompts: &TaskPrompts) -> Box<dyn Rows> {
        let p = &self.0;
        let (a, b) = pair_ids(index, prompts, self.sides());
        Box::new(PairRows {
            a,
            b,
            labels: p.iter().map(|x| x.label).collect(),
        })
    }
}

/// Each pair's two sides in the text cache and its label.
struct PairRows {
    a: Tensor,
    b: Tensor,
    labels: Vec<bool>,
}

impl Rows for PairRows {
    fn n_examples(&self) -> usize {
        self.labels.len()
    }

    fn gold(&self) -> Option<Items> {
        Some(Items(
            self.labels
                .iter()
                .map(|&l| if l { 1.0 } else { 0.0 })
                .collect(),
        ))
    }

    /// Accuracy, F1 and AP x100 with the best thresholds; each pair's similarity.
    fn score(&self, at: &At) -> (BTreeMap<String, f64>, Items) {
        let cos = at.pair_similarities(&self.a, &self.b);
        let s = pair_scores(&cos, &self.labels);
        let mut m = BTreeMap::new();
        m.insert("accuracy".into(), 100.0 * s.accuracy);
        m.insert("f1".into(), 100.0 * s.f1);
        m.insert("ap".into(), 100.0 * s.ap);
        m.insert("accuracy_threshold".into(), s.accuracy_threshold);
        m.insert("f1_threshold".into(), s.f1_threshold);
        (m, Items::from_f64(&cos))
    }
}
