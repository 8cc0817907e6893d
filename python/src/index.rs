//! `nest.Index`: build and search an index in-process, as `nest index build` and `nest search`
//! do (nest-index's `IndexBuilder` and `Collection`: the built rows and the journal of added
//! ones, with payload filters), the GIL released while encoding and searching.

use std::path::PathBuf;

use nest_index::{Collection, Filter, Funnel, IndexBuilder, Level, Precision};
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

/// An index opened for search (the low-level class; use `nest.Index`).
#[pyclass(frozen, module = "nest._nest", name = "NativeIndex")]
pub struct NativeIndex {
    col: Collection,
    model: Shared,
    layer: usize,
    weights_note: Option<String>,
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
            model: Shared(enc, None),
            layer,
            weights_note,
        })
    }

    /// A warning when the model holds other weights than those that embedded the index
    /// (`nest_core::data::weights_note`; None: the same, or nothing recorded to compare).
    #[getter]
    fn weights_note(&self) -> Option<String> {
        self.weights_note.clone()
    }

    /// Rows built into the index (documents added since are searched too).
    fn built_rows(&self) -> usize {
        self.col.index().len()
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

/// What the index stores beside each document: its payload (JSON text, or none: `{}`), with
/// its text under `text` when `store_text`; a ValueError names a bad payload or a count that
/// differs.
fn stored_payloads(
    ids: &[String],
    texts: &[String],
    payloads: &[Option<String>],
    store_text: bool,
) -> PyResult<Vec<serde_json::Value>> {
    if ids.len() != texts.len() || payloads.len() != texts.len() {
        return Err(PyValueError::new_err(format!(
            "documents: {} ids, {} texts, {} payloads; expected one of each per document",
            ids.len(),
            texts.len(),
            payloads.len()
        )));
    }
    let parse = |i: usize, p: &Option<String>| match p {
        Some(p) => serde_json::from_str(p)
            .map_err(|e| PyValueError::new_err(format!("documents[{i}].payload: {e}"))),
        None => Ok(serde_json::json!({})),
    };
    (0..ids.len())
        .map(|i| {
            let problem = nest_core::data::id_problem(&ids[i])
                .or_else(|| nest_core::data::text_problem(&texts[i]).map(str::to_string));
            if let Some(p) = problem {
                return Err(PyValueError::new_err(format!("documents[{i}]: {p}")));
            }
            let doc = nest_core::data::Document {
                id: ids[i].clone(),
                text: texts[i].clone(),
                payload: parse(i, &payloads[i])?,
            };
            Ok(doc.stored(store_text))
        })
        .collect()
}

/// Builds an index at `out` of the documents (`ids`, `texts`, `payloads` as JSON objects or
/// none) embedded by `model` at `layer` (default: the last), one level per (dim, precision):
/// `nest index build`. `store_text` keeps each text in its payload and records so in the index
/// (`--store-text`), so that documents a server adds later keep theirs too.
#[pyfunction]
#[pyo3(signature = (out, model, ids, texts, payloads, dims = None, precision = "float32".to_string(), layer = None, overwrite = false, batch_size = 32, store_text = false, prompt_name = None, prompt = None, keep_added = None))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
pub fn index_build_native(
    py: Python<'_>,
    out: PathBuf,
    model: String,
    ids: Vec<String>,
    texts: Vec<String>,
    payloads: Vec<Option<String>>,
    dims: Option<Vec<usize>>,
    precision: String,
    layer: Option<usize>,
    overwrite: bool,
    batch_size: usize,
    store_text: bool,
    prompt_name: Option<String>,
    prompt: Option<String>,
    keep_added: Option<bool>,
) -> PyResult<usize> {
    let options = BuildOptions {
        dims,
        precision,
        layer,
        overwrite,
        batch_size,
        store_text,
        prompt_name,
        prompt,
        keep_added,
    };
    // `out` the model's own folder (overwrite=True would replace the model with the index)
    let model_dir = std::path::Path::new(&model);
    nest_core::fsutil::check_output_spares_inputs("path", &out, &[("model", model_dir)])
        .map_err(crate::core_err)?;
    // one build per index at a time, and none under a server of it (as `nest index build`)
    let build = || build_index(py, &out, &model, ids, texts, payloads, options);
    nest_core::lock::building(&out, build).map_err(crate::core_err)?
}

/// [`index_build_native`]'s options after the documents.
struct BuildOptions {
    dims: Option<Vec<usize>>,
    precision: String,
    layer: Option<usize>,
    overwrite: bool,
    batch_size: usize,
    store_text: bool,
    prompt_name: Option<String>,
    prompt: Option<String>,
    keep_added: Option<bool>,
}

/// [`index_build_native`] under the index's lock.
fn build_index(
    py: Python<'_>,
    out: &std::path::Path,
    model: &str,
    ids: Vec<String>,
    texts: Vec<String>,
    payloads: Vec<Option<String>>,
    o: BuildOptions,
) -> PyResult<usize> {
    // documents a server added to the index overwrite=True replaces: refused before any work
    let added = nest_index::rebuild::added_rows(out);
    if o.overwrite && added > 0 && o.keep_added.is_none() {
        return Err(index_err(nest_index::rebuild::refusal(out, added)));
    }
    let payloads = stored_payloads(&ids, &texts, &payloads, o.store_text)?;
    let precisions = Precision::parse_list(&o.precision).map_err(index_err)?;
    let enc = crate::detach(py, || load(model, None))??;
    let layer = o.layer.unwrap_or(enc.num_layers());
    nest_core::spec::check_layers("layer", &[layer], enc.num_layers()).map_err(crate::core_err)?;
    let d = enc.output_dim();
    let dims = o.dims.unwrap_or_else(|| vec![d]);
    nest_core::spec::check_dims("dims", &dims, d).map_err(crate::core_err)?;
    let levels: Vec<Level> = dims
        .iter()
        .flat_map(|&dim| {
            precisions
                .iter()
                .map(move |&precision| Level { precision, dim })
        })
        .collect();
    let mut source = nest_core::data::point_record(model, layer, enc.tokenizer.max_length());
    if o.store_text {
        source[nest_core::data::STORE_TEXT] = true.into();
    }
    let (name, text) = (o.prompt_name.as_deref(), o.prompt.as_deref());
    let document = side_prompt(&enc, name, text, nest_model::prompt::Side::Document)?;
    source[nest_core::data::DOCUMENT_PROMPT] = document.into();
    let document = document.map(str::to_string);
    let shared = Shared(enc, None);
    crate::detach_interruptible(py, || -> PyResult<usize> {
        let mut b =
            IndexBuilder::create(out, d, &levels, true, source, o.overwrite).map_err(index_err)?;
        if let Some(keep) = o.keep_added {
            b.keep_added(keep).map_err(index_err)?;
        }
        let vectors = embed(
            shared.get(),
            layer,
            &texts,
            o.batch_size.max(1),
            document.as_deref(),
        )
        .map_err(crate::py_err)?;
        for ((id, p), v) in ids.iter().zip(&payloads).zip(&vectors) {
            b.push(id, Some(p), v).map_err(index_err)?;
        }
        let m = b.finish().map_err(index_err)?;
        Ok(m.count)
    })?
}
