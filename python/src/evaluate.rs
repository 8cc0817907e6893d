//! `nest.evaluate`: `nest eval`'s grid in-process (nest-eval's `suite::evaluate`, the same code),
//! with the GIL released; the report comes back as JSON text (`report.json`'s), written to a
//! folder as well when asked.

use std::path::PathBuf;

use nest_eval::quantize::Precision;
use nest_eval::suite::{self, GridSpec};
use nest_eval::tasks::{default_sources, Task, TaskKind, TaskSource};
use nest_model::prompt::{PromptChoice, TaskPromptChoice};
use nest_model::{Adaptor, DtypeChoice, EncodeOptions, Keys, Offer};
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

fn eval_err(e: nest_eval::Error) -> PyErr {
    match e {
        nest_eval::Error::Model(m) => crate::py_err(m),
        nest_eval::Error::Core(c) => crate::core_err(c),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// Evaluates `model` over the (layer x dim x precision) grid on `tasks` (`nest eval --tasks`,
/// from `data_root`) plus the STS files in `sts`; returns the report as JSON text, also
/// written to `out` when given (not over another model's report without `overwrite`), and a warning when `adaptor` was trained on another model.
/// Prompts as `nest eval`'s: by default the model's own (its default prompt for every text,
/// its `query` / `document` prompts for retrieval), or the ones named.
#[pyfunction]
#[pyo3(signature = (model, tasks = None, sts = Vec::new(), data_root = PathBuf::from("../shared/datasets"), layers = None, dims = None, precision = "float32".to_string(), dtype = "auto".to_string(), batch_size = 32, out = None, prompt_name = None, query_prompt_name = None, document_prompt_name = None, adaptor = None, overwrite = false, rescore = 4))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
pub fn evaluate_native(
    py: Python<'_>,
    model: String,
    tasks: Option<String>,
    sts: Vec<PathBuf>,
    data_root: PathBuf,
    layers: Option<Vec<usize>>,
    dims: Option<Vec<usize>>,
    precision: String,
    dtype: String,
    batch_size: usize,
    out: Option<PathBuf>,
    prompt_name: Option<String>,
    query_prompt_name: Option<String>,
    document_prompt_name: Option<String>,
    adaptor: Option<PathBuf>,
    overwrite: bool,
    rescore: usize,
) -> PyResult<(String, Option<String>)> {
    if let (Some(o), false) = (&out, overwrite) {
        // before anything loads: another model's report in `out` is kept
        nest_eval::files::check_replaces_own(o, &model, ("out", "overwrite=True"))
            .map_err(eval_err)?;
    }
    let choice: DtypeChoice = dtype
        .parse()
        .map_err(|e: String| PyValueError::new_err(format!("dtype: {e}")))?;
    let precisions = Precision::parse_list(&precision).map_err(eval_err)?;
    // what the report's `command` records of this call
    let asked = format!("tasks={tasks:?}, sts={sts:?}");
    let mut sources: Vec<TaskSource> = match &tasks {
        Some(t) => {
            let kinds = TaskKind::parse_list(t).map_err(eval_err)?;
            if let Some(p) = nest_eval::tasks::data_root_problem(&data_root, "data_root") {
                return Err(PyFileNotFoundError::new_err(p));
            }
            default_sources(&data_root, &kinds)
        }
        None => Vec::new(),
    };
    sources.extend(sts.into_iter().map(TaskSource::Sts));
    if sources.is_empty() {
        return Err(PyValueError::new_err(
            "nothing to evaluate: pass tasks (e.g. \"sts,retrieval\") or sts files",
        ));
    }
    crate::detach_interruptible(
        py,
        move || -> nest_eval::Result<(String, Option<String>)> {
            let tasks = sources
                .iter()
                .map(Task::load)
                .collect::<Result<Vec<_>, _>>()?;
            let dir = nest_model::hub::resolve(&model)?;
            let mut enc =
                nest_model::ElasticEncoder::load(&dir, nest_model::default_device(), None)?;
            enc.convert_for_inference(nest_model::dtype::resolve(choice, enc.device()).dtype)?;
            let adaptor = adaptor.map(|p| Adaptor::load(&p)).transpose()?;
            let note = match &adaptor {
                Some(a) => a.foreign_note(&enc)?,
                None => None,
            };
            let (layers, dims) = Offer::new(&enc, adaptor.as_ref())?
                .resolve_grid(layers, dims, Keys::GRID_FLAGS)
                .map_err(nest_core::Error::from)?;
            fn named(n: &Option<String>) -> PromptChoice<'_> {
                PromptChoice {
                    name: n.as_deref(),
                    text: None,
                }
            }
            let prompts = enc.prompts.for_tasks(TaskPromptChoice {
                text: named(&prompt_name),
                query: named(&query_prompt_name),
                document: named(&document_prompt_name),
                keys: ["prompt_name", "query_prompt_name", "document_prompt_name"],
            })?;
            let spec = GridSpec {
                layers,
                dims,
                precisions,
                rescore,
                logreg: Default::default(),
                adaptor: adaptor.map(std::rc::Rc::new),
                items: true,
                prompts,
            };
            let opts = EncodeOptions {
                batch_size,
                ..EncodeOptions::default()
            };
            let command = format!(
                "nest.evaluate({model:?}, {asked}, layers={:?}, dims={:?}, \
                 precision={precision:?}, rescore={rescore})",
                spec.layers, spec.dims
            );
            let report =
                suite::evaluate(&model, command, &enc, &tasks, &spec, 0, opts, &mut |_| {})?;
            if let Some(o) = &out {
                report.write(o)?;
            }
            let text = serde_json::to_string(&report);
            Ok((
                text.map_err(|e| nest_eval::Error::Report(e.to_string()))?,
                note,
            ))
        },
    )?
    .map_err(eval_err)
}
