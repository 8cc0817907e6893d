//! The evaluation tasks and where their data lives.
//!
//! Defaults (under `--data-root`, normally `../shared/datasets`), as the papers report them:
//! - `sts`: STS-B test, SICK-R test (Spearman x100 of cosine vs gold)
//! - `cls`: Banking77, TweetEval-emotion (logistic regression, train -> test)
//! - `pair`: MRPC test, WiC test, SICK-E test (entailment vs not)
//! - `retrieval`: SciFact (BEIR, test qrels)

use std::path::{Path, PathBuf};

use nest_core::data::{
    read_classification, read_pairs, read_sts, Beir, LabelledPair, LabelledText, StsPair,
};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// A family of tasks, each with its own protocol and main metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskKind {
    Sts,
    Cls,
    Pair,
    Retrieval,
}

impl TaskKind {
    pub fn parse_list(s: &str) -> Result<Vec<TaskKind>> {
        let mut v = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            v.push(match p {
                "sts" => TaskKind::Sts,
                "cls" | "classification" => TaskKind::Cls,
                "pair" | "pair-classification" => TaskKind::Pair,
                "retrieval" => TaskKind::Retrieval,
                other => {
                    return Err(Error::Core(nest_core::Error::value(
                        "--tasks",
                        format!("'{other}' is not one of sts, cls, pair, retrieval"),
                    )))
                }
            });
        }
        if v.is_empty() {
            return Err(Error::Core(nest_core::Error::value(
                "--tasks",
                "no task given",
            )));
        }
        v.sort();
        v.dedup();
        Ok(v)
    }

    pub fn name(&self) -> &'static str {
        match self {
            TaskKind::Sts => "sts",
            TaskKind::Cls => "cls",
            TaskKind::Pair => "pair",
            TaskKind::Retrieval => "retrieval",
        }
    }

    /// The metric a cell is ranked by (x100 in reports), as MTEB's main score.
    pub fn main_metric(&self) -> &'static str {
        match self {
            TaskKind::Sts => "spearman",
            TaskKind::Cls => "accuracy",
            TaskKind::Pair => "ap",
            TaskKind::Retrieval => "ndcg_at_10",
        }
    }
}

/// Where one task's data is.
#[derive(Debug, Clone)]
pub enum TaskSource {
    Sts(PathBuf),
    Cls { train: PathBuf, test: PathBuf },
    Pair(PathBuf),
    Retrieval { dir: PathBuf, split: String },
}

/// A task's data, read and checked.
#[derive(Debug)]
pub enum TaskData {
    Sts(Vec<StsPair>),
    Cls {
        train: Vec<LabelledText>,
        test: Vec<LabelledText>,
    },
    Pair(Vec<LabelledPair>),
    Retrieval(Beir),
}

/// One task: a name such as `stsb/test`, its kind, its files and its data.
#[derive(Debug)]
pub struct Task {
    pub name: String,
    pub kind: TaskKind,
    pub files: Vec<PathBuf>,
    pub data: TaskData,
    pub warnings: Vec<String>,
}

/// `../shared/datasets/stsb/test.tsv` -> `stsb/test`.
pub fn task_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match path.parent().and_then(|p| p.file_name()) {
        Some(dir) => format!("{}/{stem}", dir.to_string_lossy()),
        None => stem,
    }
}

impl Task {
    /// Reads and checks a task's files.
    pub fn load(src: &TaskSource) -> Result<Task> {
        Ok(match src {
            TaskSource::Sts(p) => Task {
                name: task_name(p),
                kind: TaskKind::Sts,
                files: vec![p.clone()],
                data: TaskData::Sts(read_sts(p)?),
                warnings: vec![],
            },
            TaskSource::Pair(p) => Task {
                name: task_name(p),
                kind: TaskKind::Pair,
                files: vec![p.clone()],
                data: TaskData::Pair(read_pairs(p)?),
                warnings: vec![],
            },
            TaskSource::Cls { train, test } => {
                let tr = read_classification(train)?;
                let te = read_classification(test)?;
                let known: std::collections::HashSet<&str> =
                    tr.iter().map(|t| t.label.as_str()).collect();
                let mut unseen: Vec<&str> = te
                    .iter()
                    .map(|t| t.label.as_str())
                    .filter(|l| !known.contains(l))
                    .collect();
                let n_unseen = unseen.len();
                unseen.sort_unstable();
                unseen.dedup();
                let mut warnings = vec![];
                if n_unseen > 0 {
                    warnings.push(format!(
                        "{}: {n_unseen} test row(s) have labels absent from {} ({}); they count as errors",
                        test.display(),
                        train.display(),
                        unseen.join(", ")
                    ));
                }
                let name = train
                    .parent()
                    .and_then(|p| p.file_name())
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| task_name(test));
                Task {
                    name,
                    kind: TaskKind::Cls,
                    files: vec![train.clone(), test.clone()],
                    data: TaskData::Cls {
                        train: tr,
                        test: te,
                    },
                    warnings,
                }
            }
            TaskSource::Retrieval { dir, split } => {
                let b = Beir::read(dir, split)?;
                let name = format!(
                    "{}/{split}",
                    dir.file_name()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default()
                );
                Task {
                    name,
                    kind: TaskKind::Retrieval,
                    files: vec![
                        dir.join("corpus.jsonl"),
                        dir.join("queries.jsonl"),
                        dir.join("qrels").join(format!("{split}.tsv")),
                    ],
                    warnings: b.warnings.clone(),
                    data: TaskData::Retrieval(b),
                }
            }
        })
    }
}

/// The default data sources of the given kinds under `root`.
pub fn default_sources(root: &Path, kinds: &[TaskKind]) -> Vec<TaskSource> {
    let mut v = Vec::new();
    for k in kinds {
        match k {
            TaskKind::Sts => {
                v.push(TaskSource::Sts(root.join("stsb/test.tsv")));
                v.push(TaskSource::Sts(root.join("sick-r/test.tsv")));
            }
            TaskKind::Cls => {
                for d in ["banking77", "tweeteval-emotion"] {
                    v.push(TaskSource::Cls {
                        train: root.join(d).join("train.tsv"),
                        test: root.join(d).join("test.tsv"),
                    });
                }
            }
            TaskKind::Pair => {
                for d in ["mrpc", "wic", "sick-e"] {
                    v.push(TaskSource::Pair(root.join(d).join("test.tsv")));
                }
            }
            TaskKind::Retrieval => v.push(TaskSource::Retrieval {
                dir: root.join("scifact"),
                split: "test".into(),
            }),
        }
    }
    v
}
