//! Inputs of `nest compress`: embedding matrices with ids, qrels, the train/validation split, and
//! the cache of a model's embeddings of a BEIR folder.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use nest_core::fsutil::sha256_hex;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use sha2::{Digest, Sha256};
use tch::{Kind, Tensor};

use crate::{Error, Result};

mod npy;
use npy::check_npy_size;

/// Rows of vectors and their ids.
#[derive(Debug)]
pub struct Embeddings {
    pub ids: Vec<String>,
    /// `[N, D]` float32 on CPU.
    pub x: Tensor,
}

impl Embeddings {
    pub fn dim(&self) -> usize {
        self.x.size()[1] as usize
    }
    /// Row index of each id.
    pub fn index(&self) -> HashMap<&str, i64> {
        self.ids
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), i as i64))
            .collect()
    }
}

/// query id -> (doc id -> relevance > 0).
pub type Qrels = BTreeMap<String, HashMap<String, i64>>;

/// Reads a 2-D float matrix from `.npy` (float32 or float64, C order) or `.safetensors` (tensor
/// `embeddings`, or the only tensor).
pub fn read_matrix(path: &Path) -> Result<Tensor> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let t = match ext {
        "npy" => {
            check_npy_size(path)?;
            let f32s: std::result::Result<ndarray::Array2<f32>, _> = ndarray_npy::read_npy(path);
            match f32s {
                Ok(a) => to_tensor(a.as_standard_layout().as_slice().unwrap_or(&[]), a.dim()),
                Err(_) => {
                    let a: ndarray::Array2<f64> = ndarray_npy::read_npy(path).map_err(|e| {
                        Error::input(
                            path,
                            format!("expected a 2-D float32 or float64 .npy array: {e}"),
                        )
                    })?;
                    let v: Vec<f32> = a.iter().map(|&x| x as f32).collect();
                    to_tensor(&v, a.dim())
                }
            }
        }
        "safetensors" => {
            let all = Tensor::read_safetensors(path)
                .map_err(|e| Error::input(path, format!("unreadable safetensors file: {e}")))?;
            let t = match all.iter().find(|(n, _)| n == "embeddings") {
                Some((_, t)) => t.shallow_clone(),
                None if all.len() == 1 => all[0].1.shallow_clone(),
                None => {
                    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(Error::input(
                        path,
                        format!("no tensor named 'embeddings' (found {names:?})"),
                    ));
                }
            };
            if t.dim() != 2 {
                return Err(Error::input(
                    path,
                    format!("expected a 2-D tensor, got shape {:?}", t.size()),
                ));
            }
            t.to_kind(Kind::Float)
        }
        _ => {
            return Err(Error::input(
                path,
                "unknown extension: expected .npy or .safetensors",
            ))
        }
    };
    if t.size()[0] == 0 || t.size()[1] == 0 {
        return Err(Error::input(path, format!("empty matrix {:?}", t.size())));
    }
    if !bool::try_from(t.isfinite().all()).unwrap_or(false) {
        return Err(Error::input(
            path,
            "the matrix holds NaN or infinite values",
        ));
    }
    Ok(t)
}

fn to_tensor(v: &[f32], (r, c): (usize, usize)) -> Tensor {
    Tensor::from_slice(v).view([r as i64, c as i64])
}

/// Ids of `n` rows: one per line of `path`, or `0..n` when no file is given.
pub fn read_ids(path: Option<&Path>, n: usize, matrix: &Path) -> Result<Vec<String>> {
    let Some(p) = path else {
        return Ok((0..n).map(|i| i.to_string()).collect());
    };
    let raw = std::fs::read_to_string(p).map_err(|e| nest_core::Error::io(p, e))?;
    let ids: Vec<String> = raw
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if ids.len() != n {
        return Err(Error::input(
            p,
            format!("{} ids, but {} has {n} rows", ids.len(), matrix.display()),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some((i, d)) = ids
        .iter()
        .enumerate()
        .find(|(_, d)| !seen.insert(d.as_str()))
    {
        return Err(Error::input(
            p,
            format!("line {}: duplicate id '{d}'", i + 1),
        ));
    }
    Ok(ids)
}

/// A matrix and its ids.
pub fn read_embeddings(matrix: &Path, ids: Option<&Path>) -> Result<Embeddings> {
    let x = read_matrix(matrix)?;
    let ids = read_ids(ids, x.size()[0] as usize, matrix)?;
    Ok(Embeddings { ids, x })
}

/// When `ids` are the row numbers `0..n` (no ids file was given), a hint naming the flag that
/// gives the real ids; else nothing.
fn row_number_hint(ids: &[String], flag: &str) -> String {
    let rows = ids.iter().enumerate().all(|(i, d)| *d == i.to_string());
    match rows && !ids.is_empty() {
        true => format!(
            " (without {flag} the ids are the row numbers 0..{}; pass {flag} FILE, one id per row)",
            ids.len() - 1
        ),
        false => String::new(),
    }
}

/// Reads BEIR qrels (`query-id corpus-id score`, rows with score > 0 kept) and checks every id
/// against the query and corpus ids, naming the line of the first unknown one.
pub fn read_qrels(path: &Path, queries: &Embeddings, corpus: &Embeddings) -> Result<Qrels> {
    let t = nest_core::data::TsvTable::read(path, &["query-id", "corpus-id", "score"])?;
    let (qi, ci) = (queries.index(), corpus.index());
    let mut out = Qrels::new();
    for (line, row) in &t.rows {
        let score: i64 = row[2].trim().parse().map_err(|_| {
            Error::input(
                path,
                format!("line {line}: score '{}' is not an integer", row[2]),
            )
        })?;
        if !qi.contains_key(row[0].as_str()) {
            return Err(Error::input(
                path,
                format!(
                    "line {line}: query id '{}' is not among the {} query ids{}",
                    row[0],
                    qi.len(),
                    row_number_hint(&queries.ids, "--query-ids")
                ),
            ));
        }
        if !ci.contains_key(row[1].as_str()) {
            return Err(Error::input(
                path,
                format!(
                    "line {line}: corpus id '{}' is not among the {} corpus ids{}",
                    row[1],
                    ci.len(),
                    row_number_hint(&corpus.ids, "--corpus-ids")
                ),
            ));
        }
        if score > 0 {
            out.entry(row[0].clone())
                .or_default()
                .insert(row[1].clone(), score);
        }
    }
    if out.is_empty() {
        return Err(Error::input(path, "no judged relevant (score > 0) pair"));
    }
    Ok(out)
}

/// How many of `queries` [`split`] holds out for validation: `val_fraction` of them, at least
/// one, and one fewer than all (when there are two or more).
pub fn val_queries(queries: usize, val_fraction: f64) -> usize {
    ((queries as f64 * val_fraction).round() as usize).clamp(1, queries.saturating_sub(1).max(1))
}

/// Below this many validation queries, `nest compress` warns that the validation loss (which
/// picks each stage's best epoch) is noisy.
pub const FEW_VAL_QUERIES: usize = 30;

/// Splits qrels by query into (train, validation), `val_fraction` of the queries (at least one)
/// to validation, seeded.
pub fn split(q: &Qrels, val_fraction: f64, seed: u64) -> (Qrels, Qrels) {
    let mut ids: Vec<&String> = q.keys().collect();
    ids.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    let (val, train) = ids.split_at(val_queries(ids.len(), val_fraction));
    let pick = |s: &[&String]| {
        s.iter()
            .map(|k| ((*k).clone(), q[*k].clone()))
            .collect::<Qrels>()
    };
    (pick(train), pick(val))
}

/// Where a model's embeddings of a BEIR folder are cached: `dir/<key>.safetensors` + `.json`.
/// The key hashes the model's weights, the corpus and queries files, the layer and max length;
/// the JSON holds the ids and the safetensors file's sha256, so a truncated or altered cache is
/// detected and rebuilt.
#[derive(Debug, Clone)]
pub struct EmbeddingCache {
    pub dir: PathBuf,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CacheMeta {
    sha256: String,
    corpus_ids: Vec<String>,
    query_ids: Vec<String>,
}

impl EmbeddingCache {
    /// The cache key of a (model, BEIR folder, layer, max length, query and document prompts).
    pub fn key(
        model_dir: &Path,
        beir: &Path,
        layer: usize,
        max_len: usize,
        prompts: [Option<&str>; 2],
    ) -> Result<String> {
        let mut h = Sha256::new();
        for p in [
            model_dir.join("model.safetensors"),
            beir.join("corpus.jsonl"),
            beir.join("queries.jsonl"),
        ] {
            h.update(nest_core::fsutil::sha256_file(&p)?.as_bytes());
        }
        h.update(format!("layer={layer};max_len={max_len}").as_bytes());
        if prompts.iter().any(Option::is_some) {
            // (a model without query / document prompts keeps the keys cached before prompts)
            h.update(format!(";prompts={prompts:?}").as_bytes());
        }
        Ok(format!("{:x}", h.finalize())[..24].to_string())
    }

    /// The cached `(corpus, queries)` for `key`, or `None` when absent, truncated or altered.
    pub fn get(&self, key: &str) -> Option<(Embeddings, Embeddings)> {
        let meta: CacheMeta =
            serde_json::from_slice(&std::fs::read(self.dir.join(format!("{key}.json"))).ok()?)
                .ok()?;
        let st = self.dir.join(format!("{key}.safetensors"));
        if sha256_hex(&std::fs::read(&st).ok()?) != meta.sha256 {
            return None;
        }
        let all = Tensor::read_safetensors(&st).ok()?;
        let get = |n: &str| {
            all.iter()
                .find(|(k, _)| k == n)
                .map(|(_, t)| t.shallow_clone())
        };
        let (c, q) = (get("corpus")?, get("queries")?);
        if c.size()[0] as usize != meta.corpus_ids.len()
            || q.size()[0] as usize != meta.query_ids.len()
        {
            return None;
        }
        Some((
            Embeddings {
                ids: meta.corpus_ids,
                x: c,
            },
            Embeddings {
                ids: meta.query_ids,
                x: q,
            },
        ))
    }

    /// Stores `(corpus, queries)` under `key` (atomically: the JSON, written last, commits).
    pub fn put(&self, key: &str, corpus: &Embeddings, queries: &Embeddings) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| nest_core::Error::io(&self.dir, e))?;
        let st = self.dir.join(format!("{key}.safetensors"));
        let tmp = self.dir.join(format!("{key}.safetensors.partial"));
        Tensor::write_safetensors(&[("corpus", &corpus.x), ("queries", &queries.x)], &tmp)?;
        std::fs::rename(&tmp, &st).map_err(|e| nest_core::Error::io(&st, e))?;
        let bytes = std::fs::read(&st).map_err(|e| nest_core::Error::io(&st, e))?;
        let meta = CacheMeta {
            sha256: sha256_hex(&bytes),
            corpus_ids: corpus.ids.clone(),
            query_ids: queries.ids.clone(),
        };
        let json = serde_json::to_vec(&meta).expect("serialises");
        nest_core::fsutil::write_atomic(&self.dir.join(format!("{key}.json")), &json)?;
        Ok(())
    }
}
