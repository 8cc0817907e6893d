//! Nest evaluation: metrics, the STS task over the (layer x dim) grid, and reports.
//!
//! The grid runner embeds every distinct text once per model (all requested layers in one
//! forward pass) and derives every (layer, dim) cell from the cached pooled vectors.

pub mod error;
pub mod heatmap;
pub mod metrics;
pub mod report;
pub mod sts;

pub use error::{Error, Result};
pub use report::{Report, TaskGrid};
