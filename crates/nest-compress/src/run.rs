//! `nest compress` as a library call: inputs in, a trained (or fitted) adaptor out, with its
//! training history and its validation and test nDCG@10 at every dim recorded in `adaptor.json`.

use nest_model::adaptor::{AdaptorMeta, HeadMeta};
use nest_model::pooling::l2_normalize;
use nest_model::Adaptor;
use serde_json::json;
use tch::{Kind, Tensor};

use nest_eval::items::Items;
use nest_eval::quantize::Precision;
use nest_eval::report::{Cell, FileRef, ModelInfo, Report, TaskResult};
use nest_eval::tasks::TaskKind;

use crate::data::{split, Embeddings, Qrels};
use crate::method::{check_dims, Method, Options};
use crate::train::{train, EpochLog, Trained};
use crate::{eval, pca, Error, Result};

/// What to compress and how to judge it.
#[derive(Debug)]
pub struct Inputs {
    pub corpus: Embeddings,
    pub queries: Embeddings,
    /// Training qrels; a seeded `val_fraction` of their queries is held out for stopping and
    /// choices.
    pub train: Qrels,
    /// Test qrels, scored once at the end (never used for a choice).
    pub test: Option<Qrels>,
    pub val_fraction: f64,
    /// Where the inputs came from (recorded, and reused by a resume).
    pub source: serde_json::Value,
}

impl Inputs {
    /// L2-normalises both matrices (the adaptor normalises its input the same way) and checks
    /// that their widths agree.
    pub fn normalized(mut self) -> Result<Self> {
        if self.corpus.dim() != self.queries.dim() {
            return Err(Error::option(
                "--queries",
                format!(
                    "queries have {} dims, the corpus {}",
                    self.queries.dim(),
                    self.corpus.dim()
                ),
            ));
        }
        self.corpus.x = l2_normalize(&self.corpus.x.to_kind(Kind::Float));
        self.queries.x = l2_normalize(&self.queries.x.to_kind(Kind::Float));
        Ok(self)
    }
}

/// nDCG@10 of `q`'s queries at each of `dims` through adaptor `a`, or, with `None`, of the
/// original vectors truncated (the baseline an adaptor has to beat).
fn scores(
    a: Option<&Adaptor>,
    inp: &Inputs,
    q: &Qrels,
    dims: &[usize],
) -> Result<serde_json::Value> {
    let mut m = serde_json::Map::new();
    for &d in dims {
        let s = eval::retrieval(a, &inp.corpus, &inp.queries, q, d)?;
        m.insert(d.to_string(), json!(s.ndcg_at_10));
    }
    Ok(serde_json::Value::Object(m))
}

/// What fitting or training produced, before it becomes an adaptor.
struct Fitted {
    /// `(W [out, D], b [out])` per head.
    heads: Vec<(Tensor, Tensor)>,
    history: Vec<EpochLog>,
    selections: Vec<Vec<i64>>,
    /// The dims each head serves.
    served: Vec<Vec<usize>>,
    ware: Vec<(usize, f64, f64)>,
}

impl Fitted {
    /// One untrained head `(w, b)` serving all of `dims`.
    fn single(w: Tensor, b: Tensor, dims: &[usize]) -> Self {
        Fitted {
            heads: vec![(w, b)],
            history: vec![],
            selections: vec![],
            served: vec![dims.to_vec()],
            ware: vec![],
        }
    }
}

impl From<Trained> for Fitted {
    /// The heads and training record of a trained adaptor.
    fn from(t: Trained) -> Self {
        let served = t.heads.iter().map(|h| h.2.clone()).collect();
        Fitted {
            heads: t.heads.into_iter().map(|h| (h.0, h.1)).collect(),
            history: t.history,
            selections: t.selections,
            served,
            ware: t.ware,
        }
    }
}

/// PCA fitted on the corpus, cut to the widest of `dims`.
fn pca_head(inp: &Inputs, dims: &[usize]) -> Fitted {
    let (w, b) = pca::fit(&inp.corpus.x);
    let w = w.narrow(0, 0, dims[0] as i64).copy();
    let b = b.narrow(0, 0, dims[0] as i64).copy();
    Fitted::single(w, b, dims)
}

/// The identity of width `dim` cut to the widest of `dims` (plain truncation).
fn truncate_head(dim: usize, dims: &[usize]) -> Fitted {
    let eye = Tensor::eye(dim as i64, (Kind::Float, tch::Device::Cpu));
    let w = eye.narrow(0, 0, dims[0] as i64).copy();
    let b = Tensor::zeros([dims[0] as i64], (Kind::Float, tch::Device::Cpu));
    Fitted::single(w, b, dims)
}

/// Every dim served, the resumed adaptor's included, widest first, without repeats.
fn served_dims(init: Option<&Adaptor>, served: &[Vec<usize>]) -> Vec<usize> {
    let mut all_dims: Vec<usize> = init.map(|a| a.dims()).unwrap_or_default();
    all_dims.extend(served.iter().flatten());
    all_dims.sort_unstable_by(|a, b| b.cmp(a));
    all_dims.dedup();
    all_dims
}

/// The heads' metadata: one head serving `all_dims` after a resume, else one per served chain.
fn head_meta(init: Option<&Adaptor>, all_dims: &[usize], served: &[Vec<usize>]) -> Vec<HeadMeta> {
    if init.is_some() {
        vec![HeadMeta {
            dims: all_dims.to_vec(),
        }]
    } else {
        served
            .iter()
            .map(|d| HeadMeta { dims: d.clone() })
            .collect()
    }
}

/// The resumed adaptor's training stages with this one appended.
fn stages(
    init: Option<&Adaptor>,
    dims: &[usize],
    epochs: usize,
    seconds: f64,
    opts: &Options,
) -> serde_json::Value {
    let mut stages = init
        .and_then(|a| a.meta.info.get("stages").cloned())
        .unwrap_or(json!([]));
    if let Some(s) = stages.as_array_mut() {
        s.push(json!({"dims": dims, "epochs": epochs, "seconds": seconds, "options": opts}));
    }
    stages
}

/// Trains `method` over `dims` (or fits PCA / the identity) and returns the adaptor.
/// `init` continues from a saved nested map (a resume), training only the new stages.
pub fn compress(
    inp: &Inputs,
    method: Method,
    dims: &[usize],
    opts: &Options,
    init: Option<&Adaptor>,
    progress: &mut dyn FnMut(&EpochLog),
) -> Result<Adaptor> {
    let dim = inp.corpus.dim();
    check_dims(dims, dim, method)?;
    let (tr, va) = split(&inp.train, inp.val_fraction, opts.seed);
    let t0 = std::time::Instant::now();
    let fitted = match method {
        Method::Pca => pca_head(inp, dims),
        Method::Truncate => truncate_head(dim, dims),
        _ => {
            let cfg = method.config(dims, opts);
            let init_w = init.map(|a| (a.heads[0].0.shallow_clone(), a.heads[0].1.shallow_clone()));
            let t = train(&cfg, &inp.corpus, &inp.queries, &tr, &va, init_w, progress)?;
            Fitted::from(t)
        }
    };
    let seconds = t0.elapsed().as_secs_f64();
    let all_dims = served_dims(init, &fitted.served);
    let mut a = Adaptor::new(
        AdaptorMeta {
            format: 1,
            method: method.name().into(),
            input_dim: dim,
            normalize_input: true,
            heads: head_meta(init, &all_dims, &fitted.served),
            info: json!({}),
        },
        fitted.heads,
    )?;
    let stages = stages(init, dims, fitted.history.len(), seconds, opts);
    a.meta.info = json!({
        "source": inp.source,
        "method": method.name(),
        "dims": all_dims,
        "val_fraction": inp.val_fraction,
        "train_queries": tr.len(),
        "val_queries": va.len(),
        "stages": stages,
        "history": fitted.history,
        "ads_selections": fitted.selections,
        "ware_achievement": fitted.ware.iter().map(|(k, a, t)| json!({"k": k, "ads": a, "truncation": t})).collect::<Vec<_>>(),
    });
    let mut scored = Vec::new();
    for (key, adaptor) in [("", Some(&a)), ("truncated_", None)] {
        scored.push((
            format!("{key}val_ndcg_at_10"),
            scores(adaptor, inp, &va, &all_dims)?,
        ));
        let test = match &inp.test {
            Some(t) => scores(adaptor, inp, t, &all_dims)?,
            None => json!(null),
        };
        scored.push((format!("{key}test_ndcg_at_10"), test));
    }
    for (k, v) in scored {
        a.meta.info[k] = v;
    }
    Ok(a)
}

/// The test scoring of an adaptor as a Nest evaluation report (one retrieval task, one cell
/// per dim at "layer 1" = the given embeddings, float32), with each test query's nDCG@10 as
/// per-item scores: `nest eval compare` and `nest eval seeds` then read adaptors like models.
/// `None` without test qrels.
pub fn test_report(a: &Adaptor, inp: &Inputs, command: &str) -> Result<Option<Report>> {
    let Some(test) = &inp.test else {
        return Ok(None);
    };
    let src = |k: &str| inp.source.get(k).and_then(|v| v.as_str());
    let (task, file) = match (src("beir"), src("test_qrels")) {
        (Some(b), _) => {
            let dir = std::path::Path::new(b);
            let name = dir.file_name().map(|s| s.to_string_lossy().into_owned());
            (
                format!("{}/test", name.unwrap_or_default()),
                dir.join("qrels/test.tsv"),
            )
        }
        (None, Some(q)) => (
            nest_eval::tasks::task_name(std::path::Path::new(q)),
            q.into(),
        ),
        (None, None) => return Ok(None),
    };
    let t0 = std::time::Instant::now();
    let mut cells = Vec::new();
    for d in a.dims() {
        let per = eval::per_query(Some(a), &inp.corpus, &inp.queries, test, d)?;
        let m = nest_eval::metrics::retrieval::mean(&per);
        cells.push(Cell {
            layer: 1,
            dim: d,
            precision: Precision::Float32,
            metrics: [("ndcg_at_10".to_string(), 100.0 * m.ndcg_at_10)].into(),
            items: Some(Items(per.iter().map(|q| q.ndcg_at_10 as f32).collect())),
        });
    }
    let source = src("model")
        .or(src("embeddings"))
        .unwrap_or("-")
        .to_string();
    Ok(Some(Report {
        nest_version: env!("CARGO_PKG_VERSION").into(),
        command: command.into(),
        model: ModelInfo {
            path: source,
            architecture: format!("adaptor ({})", a.meta.method),
            num_layers: 1,
            hidden_size: a.meta.input_dim,
            pooling: "-".into(),
            max_seq_length: 0,
            dtype: "float32".into(),
            prompts: Default::default(),
            objective: None,
            seed: None,
        },
        layers: vec![1],
        dims: a.dims(),
        precisions: vec![Precision::Float32],
        rescore: None,
        costs: Default::default(),
        tasks: vec![TaskResult {
            task,
            kind: TaskKind::Retrieval,
            main_metric: "ndcg_at_10".into(),
            files: vec![FileRef {
                sha256: nest_core::fsutil::sha256_file(&file).unwrap_or_default(),
                path: file.display().to_string(),
            }],
            n_examples: test.len(),
            warnings: vec![],
            seconds: t0.elapsed().as_secs_f64(),
            cells,
            gold: None,
        }],
        seconds: t0.elapsed().as_secs_f64(),
    }))
}
