//! Nest evaluation: every task the papers report (STS, classification, pair classification,
//! retrieval) over the (layer x dim x precision) grid, with reports, plots, comparisons, advice
//! and embedding diagnostics.
//!
//! The runner ([`suite::run`]) embeds every distinct text once per model (all requested layers
//! in one forward pass) and derives every cell from the cached pooled vectors.

pub mod advise;
pub mod compare;
pub mod error;
mod family;
pub mod files;
pub mod inspect;
pub mod items;
pub mod metrics;
pub mod plots;
pub mod quantize;
pub mod report;
pub mod run_info;
pub mod seeds;
pub mod significance;
pub mod suite;
pub mod tasks;

pub use error::{Error, Result};
pub use report::{Report, TaskResult};
