//! `nest.Index`: build, search and change an index in-process, as `nest index build`, `nest
//! search` and a server's `/v1/documents` do (nest-index's `IndexBuilder` and `Collection`: the
//! built rows and the journal of the changes since, with payload filters), the GIL released
//! while encoding and searching.

use std::path::PathBuf;

use nest_index::collection::{Existing, NewRow};
use nest_index::{Collection, Filter, Funnel};
use nest_model::{ElasticEncoder, EncodeOptions};
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::Shared;

fn index_err(e: nest_index::Error) -> PyErr {
    use nest_index::Error as E;
    match e {
        E::Core(c) => crate::core_err(c),
        E::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(e.to_string())
        }
        E::Invalid { .. } => PyValueError::new_err(e.to_string()),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// The prompt of texts on `side` (`prompt_name` / `prompt`, else the model's prompt for the
/// side, else its default; `""`: none), or a ValueError naming `prompt_name`.
fn side_prompt<'a>(
    model: &'a ElasticEncoder,
    prompt_name: Option<&'a str>,
    prompt: Option<&'a str>,
    side: nest_model::prompt::Side,
) -> PyResult<Option<&'a str>> {
    let choice = nest_model::prompt::PromptChoice {
        name: prompt_name,
        text: prompt,
    };
    let p = model.prompts.for_side(choice, "prompt_name", side);
    Ok(p.map_err(crate::core_err)?.filter(|p| !p.is_empty()))
}

/// The model's pooled vectors of `texts` at `layer` (full width, not normalised: the index
/// normalises what it stores and what it is asked).
fn embed(
    model: &ElasticEncoder,
    layer: usize,
    texts: &[String],
    batch: usize,
    prompt: Option<&str>,
) -> nest_model::Result<Vec<Vec<f32>>> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let opts = EncodeOptions::batch(batch);
    let pooled = model.embed_prompted(&refs, &[layer], opts, prompt, &mut |_| {})?;
    let d = model.output_dim();
    let flat = nest_model::pooling::to_vec_f32(&pooled[0]);
    Ok(flat.chunks(d).map(<[f32]>::to_vec).collect())
}

fn load(model: &str, max_length: Option<usize>) -> PyResult<ElasticEncoder> {
    let dir = nest_model::hub::resolve(model).map_err(crate::py_err)?;
    ElasticEncoder::load(&dir, nest_model::default_device(), max_length).map_err(crate::py_err)
}

impl NativeIndex {
    /// Changes need the model that embedded the index (a document embedded by another would
    /// not match the others).
    fn check_own_model(&self) -> PyResult<()> {
        match &self.other_model {
            None => Ok(()),
            Some(m) => Err(PyValueError::new_err(format!(
                "model: the index was embedded by another model than {m}; open it without \
                 model= to add or delete documents"
            ))),
        }
    }
}

/// An index opened for search (the low-level class; use `nest.Index`).
#[pyclass(frozen, module = "nest._nest", name = "NativeIndex")]
pub struct NativeIndex {
    col: Collection,
    dir: PathBuf,
    model: Shared,
    layer: usize,
    weights_note: Option<String>,
    /// `model=` named another model than the index records: searches only, no changes.
    other_model: Option<String>,
}

#[pymethods]
impl NativeIndex {
    /// Opens the index at `path` with the model (and layer) it records, or `model`.
    #[new]
    #[pyo3(signature = (path, model = None))]
    fn new(py: Python<'_>, path: PathBuf, model: Option<String>) -> PyResult<Self> {
        let col = crate::detach(py, || Collection::open(&path))?.map_err(index_err)?;
        let source = col.index().manifest().source.clone();
        let name = model
            .or_else(|| {
                source
                    .get("model")
                    .and_then(|m| m.as_str())
                    .map(str::to_string)
            })
            .ok_or_else(|| {
                PyValueError::new_err(
                    "the index records no model (it was built from embeddings); pass model=",
                )
            })?;
        let max_len = source
            .get("max_length")
            .and_then(|m| m.as_u64())
            .map(|m| m as usize);
        let recorded = source.get("model").and_then(|m| m.as_str());
        let other_model = match recorded {
            Some(r) if nest_core::data::same_model(r, &name) => None,
            _ => Some(name.clone()),
        };
        let weights_note = recorded
            .filter(|r| nest_core::data::same_model(r, &name))
            .and_then(|_| nest_core::data::weights_note(&source));
        let enc = crate::detach(py, || load(&name, max_len))??;
        let layer = source
            .get("layer")
            .and_then(|l| l.as_u64())
            .map_or(enc.num_layers(), |l| l as usize);
        if enc.output_dim() != col.index().full_dim() {
            return Err(PyValueError::new_err(format!(
                "model: gives {} dims, the index holds {}",
                enc.output_dim(),
                col.index().full_dim()
            )));
        }
        Ok(NativeIndex {
            col,
            dir: path,
            model: Shared(enc, None),
            layer,
            weights_note,
            other_model,
        })
    }

    /// A warning when the model holds other weights than those that embedded the index
    /// (`nest_core::data::weights_note`; None: the same, or nothing recorded to compare).
    #[getter]
    fn weights_note(&self) -> Option<String> {
        self.weights_note.clone()
    }

    /// Documents searched: the built ones and those added since, but the deleted and
    /// replaced.
    fn rows(&self) -> usize {
        self.col.len()
    }

    /// Adds documents (`ids`, `texts`, `payloads` as JSON objects or none), embedded as the
    /// index's documents were (the document prompt it records, unless `prompt_name` /
    /// `prompt`), durably (journal lines `fsync`ed), under the index's lock (refused while a
    /// server of the index runs): `POST /v1/documents`. `existing`: "keep" an id already
    /// present, or "replace" it. JSON text of `{"added", "replaced", "existing", "count"}`.
    #[pyo3(signature = (ids, texts, payloads, existing = "keep".to_string(), prompt_name = None, prompt = None, batch_size = 32))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn add(
        &self,
        py: Python<'_>,
        ids: Vec<String>,
        texts: Vec<String>,
        payloads: Vec<Option<String>>,
        existing: String,
        prompt_name: Option<String>,
        prompt: Option<String>,
        batch_size: usize,
    ) -> PyResult<String> {
        let existing = match existing.as_str() {
            "keep" => Existing::Keep,
            "replace" => Existing::Replace,
            other => {
                return Err(PyValueError::new_err(format!(
                    "existing: \"keep\" or \"replace\", got {other:?}"
                )))
            }
        };
        self.check_own_model()?;
        let source = &self.col.index().manifest().source;
        let store_text = source.get(nest_core::data::STORE_TEXT) == Some(&true.into());
        let stored = build::stored_payloads(&ids, &texts, &payloads, store_text)?;
        // without a prompt asked for, the one the index's documents were embedded with (as
        // the server's /v1/documents)
        let recorded = match (&prompt_name, &prompt) {
            (None, None) => nest_core::data::recorded_document_prompt(source),
            _ => None,
        };
        let side = match (&prompt_name, &prompt, &recorded) {
            (None, None, None) => nest_model::prompt::Side::Text,
            _ => nest_model::prompt::Side::Document,
        };
        let recorded = recorded.map(Option::unwrap_or_default);
        let text = prompt.as_deref().or(recorded.as_deref());
        let p = side_prompt(self.model.get(), prompt_name.as_deref(), text, side)?;
        let r = crate::detach(py, || -> PyResult<_> {
            nest_core::lock::building(&self.dir, || -> PyResult<_> {
                let v = embed(self.model.get(), self.layer, &texts, batch_size.max(1), p)
                    .map_err(crate::py_err)?;
                let rows = ids
                    .into_iter()
                    .zip(stored)
                    .zip(v)
                    .map(|((id, payload), vector)| NewRow {
                        id,
                        payload: Some(payload),
                        vector,
                    })
                    .collect();
                self.col.add(rows, existing).map_err(index_err)
            })
            .map_err(crate::core_err)?
        })??;
        let out = serde_json::json!({"added": r.added, "replaced": r.replaced,
            "existing": r.existing, "count": self.col.len()});
        Ok(out.to_string())
    }

    /// Deletes the documents of `ids` durably, under the index's lock (as `add`):
    /// `POST /v1/documents/delete`. JSON text of `{"deleted", "missing", "count"}`.
    fn delete(&self, py: Python<'_>, ids: Vec<String>) -> PyResult<String> {
        self.check_own_model()?;
        let r = crate::detach(py, || -> PyResult<_> {
            nest_core::lock::building(&self.dir, || self.col.delete(&ids).map_err(index_err))
                .map_err(crate::core_err)?
        })??;
        let out = serde_json::json!({"deleted": r.deleted, "missing": r.missing,
            "count": self.col.len()});
        Ok(out.to_string())
    }

    /// The `k` best rows for each query through `funnel` (`nest search --funnel`; none: exact
    /// float32 search), among the rows whose payload passes `filter` (JSON, as `--filter`):
    /// JSON text, one list per query of `{"id", "score", "payload"?}`.
    /// Queries take `prompt_name` / `prompt`, else the model's query prompt.
    #[pyo3(signature = (queries, k = 10, funnel = None, filter = None, prompt_name = None, prompt = None))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn search(
        &self,
        py: Python<'_>,
        queries: Vec<String>,
        k: usize,
        funnel: Option<String>,
        filter: Option<String>,
        prompt_name: Option<String>,
        prompt: Option<String>,
    ) -> PyResult<String> {
        let idx = self.col.index();
        let funnel = match &funnel {
            Some(f) => Funnel::parse(f).map_err(index_err)?,
            None => Funnel::exact(idx.full_dim()),
        };
        idx.check_funnel(&funnel, k).map_err(index_err)?;
        let filter = match &filter {
            Some(f) => {
                let v: serde_json::Value = serde_json::from_str(f)
                    .map_err(|e| PyValueError::new_err(format!("filter: not JSON ({e})")))?;
                Some(Filter::parse(&v).map_err(index_err)?)
            }
            None => None,
        };
        let hits = crate::detach(py, || -> PyResult<_> {
            let enc = self.model.get();
            let (name, text) = (prompt_name.as_deref(), prompt.as_deref());
            let p = side_prompt(enc, name, text, nest_model::prompt::Side::Query)?;
            let q = embed(enc, self.layer, &queries, 32, p).map_err(crate::py_err)?;
            self.col
                .search(&q, &funnel, k, filter.as_ref())
                .map_err(index_err)
        })??;
        let out: Vec<Vec<serde_json::Value>> = hits
            .into_iter()
            .map(|h| {
                h.into_iter()
                    .map(|h| {
                        let mut v = serde_json::json!({"id": h.id, "score": h.score});
                        if let Some(p) = h.payload {
                            v["payload"] = p;
                        }
                        v
                    })
                    .collect()
            })
            .collect();
        Ok(serde_json::Value::from(out).to_string())
    }
}

mod build;
pub use build::index_build_native;
