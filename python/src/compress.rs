//! `nest.compress`: an adaptor on frozen embeddings in-process, as `nest compress` trains it
//! ([`nest_compress::job::run`]), with the GIL released.

use std::collections::HashMap;
use std::path::PathBuf;

use nest_compress::job::{self, Event, Job, Source};
use nest_compress::method::Options;
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// A nest-compress error as the Python exception of its kind.
fn compress_err(e: nest_compress::Error) -> PyErr {
    use nest_compress::Error as E;
    match e {
        E::Model(m) => crate::py_err(m),
        E::Core(c) => crate::core_err(c),
        E::Input { ref path, .. } if !path.exists() => PyFileNotFoundError::new_err(e.to_string()),
        E::Input { .. } | E::Option { .. } => PyValueError::new_err(e.to_string()),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// The inputs from `(key, value)` pairs: `model`, `beir`, `split`, `cache` for a BEIR folder;
/// `embeddings`, `corpus_ids`, `queries`, `query_ids`, `qrels`, `test_qrels` for files.
fn source(pairs: Vec<(String, String)>) -> PyResult<Option<Source>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut m: HashMap<String, String> = pairs.into_iter().collect();
    let mut need = |k: &str, why: &str| {
        m.remove(k)
            .ok_or_else(|| PyValueError::new_err(format!("{k}: needed {why}")))
    };
    let s = if let Ok(model) = need("model", "") {
        Source::Beir {
            model,
            beir: need("beir", "with model (a BEIR folder)")?.into(),
            split: need("split", "").unwrap_or_else(|_| "train".into()),
            cache: need("cache", "")
                .unwrap_or_else(|_| ".nest-cache/embeddings".into())
                .into(),
        }
    } else {
        Source::Files {
            embeddings: need("embeddings", "(or model and beir)")?.into(),
            corpus_ids: need("corpus_ids", "").ok().map(PathBuf::from),
            queries: need("queries", "with embeddings")?.into(),
            query_ids: need("query_ids", "").ok().map(PathBuf::from),
            qrels: need("qrels", "with embeddings")?.into(),
            test_qrels: need("test_qrels", "").ok().map(PathBuf::from),
        }
    };
    if let Some(k) = m.keys().next() {
        return Err(PyValueError::new_err(format!(
            "{k}: not an input of compress (model, beir, split, cache, or embeddings, \
             corpus_ids, queries, query_ids, qrels, test_qrels)"
        )));
    }
    Ok(Some(s))
}

/// Options over the defaults (the CLI's), by name.
fn options(pairs: Vec<(String, f64)>) -> PyResult<Options> {
    let mut o = Options::default();
    for (k, v) in pairs {
        let count = |v: f64| -> PyResult<usize> {
            if v < 0.0 || v.fract() != 0.0 {
                return Err(PyValueError::new_err(format!(
                    "{k}: expected a whole number >= 0, got {v}"
                )));
            }
            Ok(v as usize)
        };
        match k.as_str() {
            "alpha" => o.alpha = v,
            "scale" => o.scale = v,
            "lr" => o.lr = v,
            "tau" => o.tau = v,
            "batch_size" => o.batch_size = count(v)?,
            "epochs" => o.epochs = count(v)?,
            // 0: no early stop (the default)
            "patience" => o.patience = Some(count(v)?).filter(|&p| p > 0),
            "hard_negatives" => o.hard_negatives = count(v)?,
            "neighbours" => o.neighbours = count(v)?,
            "memory_size" => o.memory_size = count(v)?,
            "seed" => o.seed = count(v)? as u64,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "{k}: not an option of compress (alpha, scale, lr, tau, batch_size, epochs, \
                     patience, hard_negatives, neighbours, memory_size, seed)"
                )))
            }
        }
    }
    Ok(o)
}

/// Trains `method` over `dims` into `out` (or continues `resume`); returns the folder and the
/// adaptor's record (`info`: per-dim validation / test nDCG@10, stages, inputs) as JSON.
#[pyfunction]
#[pyo3(signature = (out, method, dims, inputs = Vec::new(), options = Vec::new(), val_fraction = 0.2, ads_soft = false, resume = None, overwrite = false, progress = true))]
#[allow(clippy::too_many_arguments)] // the Python keywords, one by one
pub fn compress_native(
    py: Python<'_>,
    out: Option<PathBuf>,
    method: Option<String>,
    dims: Vec<usize>,
    inputs: Vec<(String, String)>,
    options: Vec<(String, f64)>,
    val_fraction: f64,
    ads_soft: bool,
    resume: Option<PathBuf>,
    overwrite: bool,
    progress: bool,
) -> PyResult<(PathBuf, String)> {
    let mut opts = self::options(options)?;
    opts.ads_soft = ads_soft;
    let job = Job {
        method,
        dims,
        options: opts,
        val_fraction,
        source: source(inputs)?,
        out,
        resume,
        overwrite,
        command: "nest.compress (Python)".into(),
    };
    let done = crate::detach_interruptible(py, || {
        job::run(&job, &mut |e| {
            if !progress {
                return;
            }
            match e {
                Event::Message(m) => eprintln!("{m}"),
                Event::Epoch(e) => eprintln!(
                    "stage {} {:?} epoch {}: train {:.4} val {:.4}",
                    e.phase,
                    e.dims,
                    e.epoch + 1,
                    e.train_loss,
                    e.val_loss
                ),
                Event::Encoding { .. } => {}
            }
        })
    })?
    .map_err(compress_err)?;
    Ok((done.out, done.adaptor.meta.info.to_string()))
}
