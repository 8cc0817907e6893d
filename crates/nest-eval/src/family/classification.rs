//! Classification: logistic regression fitted on the train split's vectors, accuracy x100 on
//! the test split (Banking77 and TweetEval-emotion by default).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use nest_core::data::{read_classification, LabelledText};
use nest_model::prompt::TaskPrompts;
use tch::Tensor;

use super::{wrong_source, At, Rows, TaskData, TaskFamily};
use crate::items::Items;
use crate::metrics::classify::{accuracy_macro_f1, LogReg};
use crate::suite::texts::TextIndex;
use crate::tasks::{task_name, Task, TaskKind, TaskSource};
use crate::Result;

/// The classification family.
pub(crate) struct Classification;

impl TaskFamily for Classification {
    fn kind(&self) -> TaskKind {
        TaskKind::Cls
    }

    fn name(&self) -> &'static str {
        "cls"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["classification"]
    }

    fn main_metric(&self) -> &'static str {
        "accuracy"
    }

    fn default_sources(&self, root: &Path) -> Vec<TaskSource> {
        ["banking77", "tweeteval-emotion"]
            .iter()
            .map(|d| TaskSource::Cls {
                train: root.join(d).join("train.tsv"),
                test: root.join(d).join("test.tsv"),
            })
            .collect()
    }

    fn read(&self, src: &TaskSource) -> Result<Task> {
        let TaskSource::Cls { train, test } = src else {
            return Err(wrong_source(self, src));
        };
        let tr = read_classification(train)?;
        let te = read_classification(test)?;
        let warnings = unseen_labels(&tr, &te, train, test).into_iter().collect();
        let name = train
            .parent()
            .and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| task_name(test));
        Ok(Task {
            name,
            kind: TaskKind::Cls,
            files: vec![train.clone(), test.clone()],
            data: Box::new(ClsData {
                train: tr,
                test: te,
            }),
            warnings,
        })
    }

    fn statistic(&self, gold: &[f32], items: &[f32], idx: &[usize]) -> f64 {
        let right = idx.iter().filter(|&&i| items[i] == gold[i]).count();
        100.0 * right as f64 / idx.len().max(1) as f64
    }
}

/// The warning for test rows whose labels the train split lacks (they count as errors).
fn unseen_labels(
    tr: &[LabelledText],
    te: &[LabelledText],
    train: &Path,
    test: &Path,
) -> Option<String> {
    let known: HashSet<&str> = tr.iter().map(|t| t.label.as_str()).collect();
    let mut unseen: Vec<&str> = te
        .iter()
        .map(|t| t.label.as_str())
        .filter(|l| !known.contains(l))
        .collect();
    let n_unseen = unseen.len();
    unseen.sort_unstable();
    unseen.dedup();
    (n_unseen > 0).then(|| {
        format!(
            "{}: {n_unseen} test row(s) have labels absent from {} ({}); they count as errors",
            test.display(),
            train.display(),
            unseen.join(", ")
        )
    })
}

/// A classification task's two splits.
#[derive(Debug)]
struct ClsData {
    train: Vec<LabelledText>,
    test: Vec<LabelledText>,
}

impl TaskData for ClsData {
    fn timing_texts(&self) -> Vec<&str> {
        self.test.iter().map(|x| x.text.as_str()).collect()
    }

    fn rows(&self, index: &mut TextIndex, prompts: &TaskPrompts) -> Box<dyn Rows> {
        let (train, test) = (&self.train, &self.test);
        let mut names: Vec<&str> = train
            .iter()
            .chain(test.iter())
            .map(|t| t.label.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        let cls = |l: &str| names.binary_search(&l).map(|i| i as i64).unwrap_or(0);
        Box::new(ClsRows {
            train: index.ids(&prompts.text, train.iter().map(|t| t.text.as_str())),
            test: index.ids(&prompts.text, test.iter().map(|t| t.text.as_str())),
            ytr: train.iter().map(|t| cls(&t.label)).collect(),
            yte: test.iter().map(|t| cls(&t.label)).collect(),
            classes: names.len(),
        })
    }
}

/// Both splits' texts in the text cache and their classes (indices of the sorted label names).
struct ClsRows {
    train: Tensor,
    test: Tensor,
    ytr: Vec<i64>,
    yte: Vec<i64>,
    classes: usize,
}

impl Rows for ClsRows {
    fn n_examples(&self) -> usize {
        self.yte.len()
    }

    fn gold(&self) -> Option<Items> {
        Some(Items(self.yte.iter().map(|&c| c as f32).collect()))
    }

    /// Accuracy and macro-F1 x100 and the fit's iterations; each test example's predicted
    /// class. Both splits are quantised with ranges from the train split.
    fn score(&self, at: &At) -> (BTreeMap<String, f64>, Items) {
        let xtr = at.space(&self.train, &self.train);
        let xte = at.space(&self.test, &self.train);
        let model = LogReg::fit(&xtr, &self.ytr, self.classes, at.grid.logreg);
        let pred = model.predict(&xte);
        let (acc, f1) = accuracy_macro_f1(&self.yte, &pred, self.classes);
        let mut m = BTreeMap::new();
        m.insert("accuracy".into(), 100.0 * acc);
        m.insert("macro_f1".into(), 100.0 * f1);
        m.insert("logreg_iterations".into(), model.iterations as f64);
        (m, Items(pred.iter().map(|&c| c as f32).collect()))
    }
}
