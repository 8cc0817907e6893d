//! `nest._nest`: the native half of the Python package `nest` (the Python half, `nest/__init__.py`,
//! gives `Encoder.encode` sentence-transformers' signature and turns the rows into numpy / torch).
//!
//! Everything here calls nest-model's public API, the same path as `nest encode`:
//! `hub::resolve` + `ElasticEncoder::load` + `convert_for_inference(dtype::resolve(..))`, then
//! `Offer::resolve` for the point, `Prompts::resolve` for the prompt, `embed_prompted` for the
//! pooled vectors and `point::finish` for the embeddings. The GIL is released while loading and
//! encoding.

use std::path::PathBuf;

use nest_model::prompt::PromptChoice;
use nest_model::{Adaptor, DtypeChoice, ElasticEncoder, EncodeOptions, Keys, Offer, Policy};
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyMemoryError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyByteArray;
use tch::{Kind, Tensor};

mod compress;
mod distill;
mod evaluate;
mod index;
mod overrides;
mod quantize;
mod train;

/// The key names the Python API uses in messages (`layer=7: ...`).
const KEYS: Keys = Keys {
    layer: "layer",
    dim: "dim",
};

/// A nest-model error as the Python exception of its kind, carrying Nest's message: a missing
/// file `FileNotFoundError`, a bad value `ValueError`, anything else `RuntimeError`.
fn py_err(e: nest_model::Error) -> PyErr {
    use nest_core::Error as Core;
    use nest_model::Error as E;
    let msg = e.to_string();
    match &e {
        E::Missing { .. } => PyFileNotFoundError::new_err(msg),
        E::Core(Core::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(msg)
        }
        E::Core(Core::Value { .. }) => PyValueError::new_err(msg),
        _ => PyRuntimeError::new_err(msg),
    }
}

fn core_err(e: nest_core::Error) -> PyErr {
    py_err(nest_model::Error::Core(e))
}

/// [`detach`] for work that embeds (encode, evaluate, an index's build, compress): Ctrl-C stops
/// it after the batch on its way (`nest_model::encoder::stop`), and `KeyboardInterrupt` is
/// raised then, not once every text is embedded.
pub(crate) fn detach_interruptible<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    use nest_model::encoder::stop;
    stop::install(|| Python::attach(|py| py.check_signals().is_err()));
    stop::take_stopped(); // a stop left by an earlier call is not this one's
    let ran = detach(py, || stop::armed(work));
    match stop::take_stopped() {
        true => Err(PyKeyboardInterrupt::new_err(
            "stopped after the batch on its way (Ctrl-C); nothing was written",
        )),
        false => ran,
    }
}

/// `work` with Python's lock released, as `py.detach`; a panic inside it (libtorch's error
/// through tch) is a Python exception instead: `MemoryError` for an allocation that failed
/// (with what lowers it), `RuntimeError` for any other.
pub(crate) fn detach<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    let ran = py.detach(|| nest_core::caught::catch(std::panic::AssertUnwindSafe(work)));
    ran.map_err(|c| match c.out_of_memory() {
        true => PyMemoryError::new_err(format!(
            "out of memory: {}; a smaller batch_size (or max_length) lowers what one pass holds",
            c.summary()
        )),
        false => PyRuntimeError::new_err(c.describe()),
    })
}

/// The loaded encoder, shared by every Python thread that calls it.
pub(crate) struct Shared(pub(crate) ElasticEncoder, pub(crate) Option<Adaptor>);

impl Shared {
    /// The encoder, through the `Sync` wrapper (a closure that calls this captures the
    /// wrapper, not the field).
    pub(crate) fn get(&self) -> &ElasticEncoder {
        &self.0
    }
}

// SAFETY: `tch::Tensor` is neither `Send` nor `Sync` to the compiler's eye because libtorch
// does not make concurrent *writes* to one tensor safe. After loading (done before `Shared` is
// built), nothing writes the encoder: the Python class is frozen and only calls `&self`
// inference methods, whose forward passes allocate their outputs and never touch the weights in
// place (nest-model's own `embed_streams` shares the encoder across threads on the same
// reasoning). Concurrent reads of a tensor are safe in libtorch (atomic reference counts), and
// the rest of the encoder is plain data, the tokenizer (`Sync`) and an atomic counter. The
// optional adaptor is the same: weights loaded once, read by `apply`'s products only.
#[allow(unsafe_code)]
unsafe impl Send for Shared {}
#[allow(unsafe_code)]
unsafe impl Sync for Shared {}

/// A Nest model loaded for inference in one dtype (the low-level class; use `nest.Encoder`).
#[pyclass(frozen, module = "nest._nest", name = "NativeEncoder")]
struct NativeEncoder {
    enc: Shared,
    offer: Offer,
    dtype: String,
    dtype_reason: String,
    /// A warning when the adaptor was trained on another model (`Adaptor::foreign_note`).
    adaptor_note: Option<String>,
}

#[pymethods]
impl NativeEncoder {
    /// Loads `model` (a local folder, or `org/name` from the Hugging Face cache or the hub)
    /// and converts it for inference in `dtype` (`auto`, `float32`, `bf16`, `int8`).
    #[new]
    #[pyo3(signature = (model, dtype = "auto", max_length = None, adaptor = None))]
    fn new(
        py: Python<'_>,
        model: &str,
        dtype: &str,
        max_length: Option<usize>,
        adaptor: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let choice: DtypeChoice = dtype
            .parse()
            .map_err(|e: String| PyValueError::new_err(format!("dtype: {e}")))?;
        if max_length == Some(0) {
            return Err(PyValueError::new_err("max_length: must be at least 1"));
        }
        let model = model.to_string();
        let (enc, resolved) = detach(py, move || -> nest_model::Result<_> {
            let dir = nest_model::hub::resolve(&model)?;
            let mut enc = ElasticEncoder::load(&dir, nest_model::default_device(), max_length)?;
            let r = nest_model::dtype::resolve(choice, enc.device());
            enc.convert_for_inference(r.dtype)?;
            Ok((enc, r))
        })?
        .map_err(py_err)?;
        // an adaptor trained by `nest compress` / `nest.compress`: its dims are what is offered
        let adaptor = match adaptor {
            Some(dir) => Some(Adaptor::load(&dir).map_err(py_err)?),
            None => None,
        };
        let offer = Offer::new(&enc, adaptor.as_ref()).map_err(py_err)?;
        let adaptor_note = match &adaptor {
            Some(a) => a.foreign_note(&enc).map_err(py_err)?,
            None => None,
        };
        Ok(NativeEncoder {
            enc: Shared(enc, adaptor),
            offer,
            dtype: resolved.dtype.to_string(),
            dtype_reason: resolved.reason,
            adaptor_note,
        })
    }

    /// The `(layer, dim)` point that `layer` / `dim` (None: the default) resolve to.
    #[pyo3(signature = (layer = None, dim = None))]
    fn resolve_point(&self, layer: Option<usize>, dim: Option<usize>) -> PyResult<(usize, usize)> {
        let p = self
            .offer
            .resolve(layer, dim, KEYS, Policy::AnyInRange)
            .map_err(|e| core_err(e.into()))?;
        Ok((p.layer, p.dim))
    }

    /// What of the point `layer` / `dim` resolve to the model was not trained for (None: both
    /// were), for a warning (`Offer::untrained`).
    #[pyo3(signature = (layer = None, dim = None))]
    fn untrained_note(&self, layer: Option<usize>, dim: Option<usize>) -> PyResult<Option<String>> {
        let p = self
            .offer
            .resolve(layer, dim, KEYS, Policy::AnyInRange)
            .map_err(|e| core_err(e.into()))?;
        Ok(self.offer.untrained(p, KEYS))
    }

    /// The prompt text that `prompt_name` / `prompt` choose (None: the model's default, if any).
    #[pyo3(signature = (prompt_name = None, prompt = None))]
    fn resolve_prompt(
        &self,
        prompt_name: Option<&str>,
        prompt: Option<&str>,
    ) -> PyResult<Option<String>> {
        let choice = PromptChoice {
            name: prompt_name,
            text: prompt,
        };
        let p = self
            .enc
            .0
            .prompts
            .resolve(choice, "prompt_name")
            .map_err(core_err)?;
        Ok(p.map(str::to_string))
    }

    /// Encodes `texts` at `(layer, dim)`; returns `(bytes, rows, dim)`: the embeddings as
    /// little-endian float32 rows in a bytearray (numpy wraps it without a copy).
    /// `normalize`: L2-normalise after the cut (`point::finish`, as `nest encode`); else the
    /// pipeline's own output (normalised at full width when it ends with Normalize) cut to `dim`,
    /// as sentence-transformers' `truncate_dim` without `normalize_embeddings`.
    #[pyo3(signature = (texts, layer = None, dim = None, batch_size = 32, normalize = true, prompt_name = None, prompt = None, streams = 1))]
    #[allow(clippy::too_many_arguments)]
    fn encode_raw<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        layer: Option<usize>,
        dim: Option<usize>,
        batch_size: usize,
        normalize: bool,
        prompt_name: Option<&str>,
        prompt: Option<&str>,
        streams: usize,
    ) -> PyResult<(Bound<'py, PyByteArray>, usize, usize)> {
        if batch_size == 0 {
            return Err(PyValueError::new_err(
                "batch_size: must be at least 1, got 0",
            ));
        }
        let threads = tch::get_num_threads().max(1) as usize;
        if !(1..=threads).contains(&streams) {
            return Err(PyValueError::new_err(format!(
                "streams: must be between 1 and the libtorch threads ({threads}), got {streams}"
            )));
        }
        let (layer, dim) = self.resolve_point(layer, dim)?;
        let prompt = self.resolve_prompt(prompt_name, prompt)?;
        if texts.is_empty() {
            return Ok((PyByteArray::new(py, &[]), 0, dim));
        }
        let enc = &self.enc;
        let e = detach_interruptible(py, || -> nest_model::Result<Tensor> {
            let m = &enc.0;
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let opts = EncodeOptions {
                batch_size,
                streams,
                ..EncodeOptions::default()
            };
            let pooled = m.embed_prompted(&refs, &[layer], opts, prompt.as_deref(), &mut |_| {})?;
            // an adaptor's head normalises as it was trained, whatever `normalize` says
            let e = match normalize || enc.1.is_some() {
                true => nest_model::point::finish(&pooled[0], dim, enc.1.as_ref())?,
                false => {
                    let p = match m.normalize {
                        true => nest_model::pooling::l2_normalize(&pooled[0]),
                        false => pooled[0].shallow_clone(),
                    };
                    p.narrow(1, 0, dim as i64)
                }
            };
            Ok(e.to_device(tch::Device::Cpu)
                .to_kind(Kind::Float)
                .contiguous())
        })?
        .map_err(py_err)?;
        let rows = texts.len();
        let n = rows * dim;
        let out = PyByteArray::new_with(py, n * 4, |buf| {
            e.f_copy_data_u8(buf, n)
                .map_err(|err| PyRuntimeError::new_err(format!("libtorch: {err}")))
        })?;
        Ok((out, rows, dim))
    }

    /// What `nest info --json` prints, as a JSON string.
    fn info_json(&self) -> PyResult<String> {
        let mut info = self.enc.0.describe();
        info["elastic"]["offered_layers"] = serde_json::json!(self.offer.layers());
        info["elastic"]["offered_dims"] = serde_json::json!(self.offer.dims());
        info["dtype"] = serde_json::json!({"dtype": self.dtype, "reason": self.dtype_reason});
        serde_json::to_string(&info).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// The dtype the model runs in (`float32`, `bf16`, `int8`).
    #[getter]
    fn dtype(&self) -> &str {
        &self.dtype
    }

    /// A warning when the adaptor was trained on another model's vectors (None: it was not, or
    /// it records no probe).
    #[getter]
    fn adaptor_note(&self) -> Option<String> {
        self.adaptor_note.clone()
    }

    /// Transformer layers.
    #[getter]
    fn num_layers(&self) -> usize {
        self.offer.num_layers()
    }

    /// Output width (the full dim).
    #[getter]
    fn output_dim(&self) -> usize {
        self.offer.width()
    }

    /// The model's folder.
    #[getter]
    fn path(&self) -> PathBuf {
        self.enc.0.files.dir.clone()
    }
}

/// libtorch's intra-op threads (the default: libtorch's, one per physical core).
#[pyfunction]
fn get_num_threads() -> i32 {
    tch::get_num_threads()
}

/// Sets libtorch's intra-op threads for this process.
#[pyfunction]
fn set_num_threads(n: i32) -> PyResult<()> {
    if n < 1 {
        return Err(PyValueError::new_err(format!(
            "threads: must be at least 1, got {n}"
        )));
    }
    tch::set_num_threads(n);
    Ok(())
}

/// The machine Nest runs on here, as JSON (`nest_model::machine::Machine`: CPU model and
/// flags, threads, libtorch version, the device and, on a GPU, the card and driver).
#[pyfunction]
fn machine_native() -> PyResult<String> {
    let m = nest_model::machine::Machine::here();
    serde_json::to_string(&m).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// One line per `NEST_*` name of `names` (the environment's) that Nest does not read, with the
/// one it most likely meant (`nest_core::env_vars`).
#[pyfunction]
fn unknown_env_native(names: Vec<String>) -> Vec<String> {
    nest_core::env_vars::unknown(names)
}

#[pymodule]
fn _nest(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeEncoder>()?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(machine_native, m)?)?;
    m.add_function(wrap_pyfunction!(unknown_env_native, m)?)?;
    m.add_function(wrap_pyfunction!(train::train_native, m)?)?;
    m.add_function(wrap_pyfunction!(train::export_checkpoint_native, m)?)?;
    m.add_function(wrap_pyfunction!(distill::distill_native, m)?)?;
    m.add_function(wrap_pyfunction!(compress::compress_native, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate::evaluate_native, m)?)?;
    m.add_class::<index::NativeIndex>()?;
    m.add_function(wrap_pyfunction!(index::index_build_native, m)?)?;
    m.add_function(wrap_pyfunction!(quantize::quantize_native, m)?)?;
    Ok(())
}
