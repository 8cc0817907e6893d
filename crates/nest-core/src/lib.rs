//! Nest core: the pieces every other crate shares and that need no tensors.
//!
//! - [`Error`]: the one error type of this crate.
//! - [`caught`]: panics (libtorch's errors through `tch`) as errors, reported once.
//! - [`env_vars`]: the `NEST_*` variables' names; one set that Nest does not read is said.
//! - [`spelling`]: the one "did you mean" rule (the closest known name).
//! - [`spec`]: parsing and validation of the elastic grid (`--layers 1-6`, `--dims 16,32`).
//! - [`data`]: readers for the dataset layouts in `shared/datasets/README.md` (TSV, no quoting).
//! - [`output`]: embedding writers (`.npy`, `.safetensors`, `.jsonl`).
//! - [`fsutil`]: atomic file writes and content hashes.
//! - [`lock`]: one writer per run folder (an OS advisory lock that dies with its holder).
//! - [`vector`]: L2 normalisation of `f32` rows (the tensor twin is `nest_model::pooling`).

pub mod caught;
pub mod data;
pub mod env_vars;
pub mod error;
pub mod fsutil;
pub mod heap;
pub mod kept;
pub mod lock;
pub mod output;
pub mod spec;
pub mod spelling;
pub mod vector;

pub use error::{Error, Result};
pub use spec::{parse_dims, parse_layers, ElasticSpec};
