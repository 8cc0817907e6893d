//! Training data: readers for each layout, tokenised once; the epoch plan (seeded shuffle,
//! length-aware batching, no duplicate texts within a batch, a weighted mixture of sources).
//!
//! `source.rs` reads and tokenises the sources (TSV, or JSON lines through `jsonl.rs`),
//! `plan.rs` makes each epoch's batches from them.

mod infer;
mod jsonl;
mod plan;
mod source;

pub use infer::infer_format;
pub(crate) use plan::{epoch_plan, padding};
pub use plan::{Batch, Padding};
pub(crate) use source::check_inputs;
pub use source::{fingerprint, load_sources, read_source, Source, Tokenize};
