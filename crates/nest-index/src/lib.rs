//! Nest search: an on-disk index holding every vector at several (precision, dim) levels, and
//! funnel retrieval over it.
//!
//! - [`level`]: a level is one (precision, prefix dim) view of the vectors; how each precision
//!   is stored and scored.
//! - [`kernels`]: the inner loops (dot products, Hamming distance), SIMD through `simsimd` with
//!   plain references.
//! - [`build`]: [`IndexBuilder`] writes every level in one pass over the vectors, checksummed,
//!   and makes the index visible only when complete.
//! - [`reader`]: [`Index::open`] memory-maps the files and checks lengths and CRC32s before any
//!   search can run.
//! - [`funnel`]: [`Funnel`] (e.g. `binary:384>float32:64>float32:384`): a cheap first stage
//!   shortlists, later stages rerank the shortlist with more bits; exact search is the
//!   one-stage funnel at full float32.
//! - [`memory`]: [`MemoryLevel`], one level's rows in memory, stored and scored by the same code.
//! - [`mine`]: hard-negative mining (sentence-transformers' `mine_hard_negatives`) over a
//!   [`MemoryLevel`]: the selection, the output formats, the resumable output file.

pub mod build;
pub mod collection;
mod error;
pub mod funnel;
pub mod kernels;
pub mod level;
pub mod memory;
pub mod mine;
pub mod pgvector;
pub mod reader;
pub mod rebuild;
mod topk;

pub use build::IndexBuilder;
pub use collection::{Collection, Filter, Found};
pub use error::{Error, Result};
pub use funnel::{Funnel, Hit, Stage};
pub use level::{Level, Precision};
pub use memory::MemoryLevel;
pub use reader::Index;
