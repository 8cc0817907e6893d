//! `nest.Index.build`: an index built in-process, as `nest index build` builds one.

use std::path::PathBuf;

use nest_index::{IndexBuilder, Level, Precision};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::{embed, index_err, load, side_prompt};
use crate::Shared;

/// What the index stores beside each document: its payload (JSON text, or none: `{}`), with
/// its text under `text` when `store_text`; a ValueError names a bad payload or a count that
/// differs.
pub(super) fn stored_payloads(
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
