//! The evaluation tasks and where their data lives.
//!
//! Defaults (under `--data-root`, normally `../shared/datasets`), as the papers report them:
//! - `sts`: STS-B test, SICK-R test (Spearman x100 of cosine vs gold)
//! - `cls`: Banking77, TweetEval-emotion (logistic regression, train -> test)
//! - `pair`: MRPC test, WiC test, SICK-E test (entailment vs not)
//! - `retrieval`: SciFact (BEIR, test qrels)

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::family::{family, TaskData, FAMILIES};
use crate::{Error, Result};

/// A family of tasks, each with its own protocol and main metric (see `family/`, which
/// holds what each family does).
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
            let Some(f) = FAMILIES
                .iter()
                .find(|f| f.name() == p || f.aliases().contains(&p))
            else {
                let names: Vec<&str> = FAMILIES.iter().map(|f| f.name()).collect();
                return Err(Error::Core(nest_core::Error::value(
                    "--tasks",
                    format!("'{p}' is not one of {}", names.join(", ")),
                )));
            };
            v.push(f.kind());
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
        family(*self).name()
    }

    /// The metric a cell is ranked by (x100 in reports), as MTEB's main score.
    pub fn main_metric(&self) -> &'static str {
        family(*self).main_metric()
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

impl TaskSource {
    /// The family that reads it.
    pub fn kind(&self) -> TaskKind {
        match self {
            TaskSource::Sts(_) => TaskKind::Sts,
            TaskSource::Cls { .. } => TaskKind::Cls,
            TaskSource::Pair(_) => TaskKind::Pair,
            TaskSource::Retrieval { .. } => TaskKind::Retrieval,
        }
    }
}

/// One task: a name such as `stsb/test`, its kind, its files and its data (read and checked,
/// as its family holds it).
#[derive(Debug)]
pub struct Task {
    pub name: String,
    pub kind: TaskKind,
    pub files: Vec<PathBuf>,
    pub(crate) data: Box<dyn TaskData>,
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
    /// Reads and checks a task's files (its family's reader).
    pub fn load(src: &TaskSource) -> Result<Task> {
        family(src.kind()).read(src)
    }
}

/// Why `root` cannot hold the default tasks' data (`None` when it is a folder): what
/// `--data-root` (Python: `data_root`, the `key`) names, resolved against the current folder.
pub fn data_root_problem(root: &Path, key: &str) -> Option<String> {
    if root.is_dir() {
        return None;
    }
    let abs = nest_core::fsutil::absolute_in(Path::new("."), root);
    let at = match abs.as_path() == root {
        true => String::new(),
        false => format!(" ({} from the current folder)", abs.display()),
    };
    Some(format!(
        "{key} {}{at}: not a folder (expected the datasets layout of shared/datasets)",
        root.display()
    ))
}

/// The default data sources of the given kinds under `root`.
pub fn default_sources(root: &Path, kinds: &[TaskKind]) -> Vec<TaskSource> {
    kinds
        .iter()
        .flat_map(|&k| family(k).default_sources(root))
        .collect()
}
