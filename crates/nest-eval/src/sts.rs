//! Semantic textual similarity: Spearman x100 of cosine similarity against gold scores, per
//! (layer, dim) cell.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nest_core::data::{read_sts, StsPair};
use nest_model::pooling::truncate_normalize;
use nest_model::{ElasticEncoder, EncodeOptions};
use tch::Tensor;

use crate::metrics::spearman;
use crate::report::TaskGrid;
use crate::Result;

/// An STS data file, read and checked.
#[derive(Debug, Clone)]
pub struct StsTask {
    pub name: String,
    pub path: PathBuf,
    pub pairs: Vec<StsPair>,
}

impl StsTask {
    /// Reads `path`; the task name is the parent folder and stem, e.g. `stsb/test`.
    pub fn read(path: &Path) -> Result<Self> {
        let pairs = read_sts(path)?;
        Ok(StsTask {
            name: task_name(path),
            path: path.to_path_buf(),
            pairs,
        })
    }
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

/// Distinct texts of a set of pairs (first-seen order) and, per pair, the indices of its texts.
fn index_texts(pairs: &[StsPair]) -> (Vec<&str>, Vec<i64>, Vec<i64>) {
    let mut ids: HashMap<&str, i64> = HashMap::new();
    let mut texts: Vec<&str> = Vec::new();
    let mut a = Vec::with_capacity(pairs.len());
    let mut b = Vec::with_capacity(pairs.len());
    for p in pairs {
        for (s, out) in [
            (p.sentence1.as_str(), &mut a),
            (p.sentence2.as_str(), &mut b),
        ] {
            let id = *ids.entry(s).or_insert_with(|| {
                texts.push(s);
                texts.len() as i64 - 1
            });
            out.push(id);
        }
    }
    (texts, a, b)
}

/// Spearman x100 for every (layer, dim) cell of one task, from pooled vectors already computed.
///
/// # Shapes
/// - `pooled[k]`: `[n_texts, hidden]` for `layers[k]`
pub fn score_grid(
    task: &StsTask,
    pooled: &[Tensor],
    a: &[i64],
    b: &[i64],
    layers: &[usize],
    dims: &[usize],
) -> TaskGrid {
    let gold: Vec<f64> = task.pairs.iter().map(|p| p.score).collect();
    let ia = Tensor::from_slice(a);
    let ib = Tensor::from_slice(b);
    let mut scores = vec![vec![f64::NAN; layers.len()]; dims.len()];
    let _guard = tch::no_grad_guard();
    for (li, p) in pooled.iter().enumerate() {
        for (di, &d) in dims.iter().enumerate() {
            let e = truncate_normalize(p, d);
            let cos = (e.index_select(0, &ia) * e.index_select(0, &ib)).sum_dim_intlist(
                1,
                false,
                tch::Kind::Double,
            );
            let cos: Vec<f64> = Vec::<f64>::try_from(&cos).unwrap_or_default();
            scores[di][li] = 100.0 * spearman(&cos, &gold);
        }
    }
    TaskGrid {
        task: task.name.clone(),
        kind: "sts".into(),
        metric: "spearman_x100".into(),
        file: task.path.display().to_string(),
        sha256: nest_core::fsutil::sha256_file(&task.path).unwrap_or_default(),
        n_examples: task.pairs.len(),
        layers: layers.to_vec(),
        dims: dims.to_vec(),
        scores,
    }
}

/// Evaluates `tasks` over the grid: one encoding pass per task (all layers at once), then every
/// cell from the cached pooled vectors.
pub fn evaluate(
    encoder: &ElasticEncoder,
    tasks: &[StsTask],
    layers: &[usize],
    dims: &[usize],
    opts: EncodeOptions,
    progress: &mut dyn FnMut(&str, usize, usize),
) -> Result<Vec<TaskGrid>> {
    encoder.check(layers, dims)?;
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        let (texts, a, b) = index_texts(&task.pairs);
        let n = texts.len();
        let pooled = encoder.embed_layers(&texts, layers, opts, &mut |done| {
            progress(&task.name, done, n)
        })?;
        out.push(score_grid(task, &pooled, &a, &b, layers, dims));
    }
    Ok(out)
}
