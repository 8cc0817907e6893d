//! Nest training engine.
//!
//! CLI flags + recipe ([`recipe`]) -> data ([`data`]: readers, mixture, length-aware batches)
//! -> one encoder forward per column in train mode, all layers (`trainer::step`) ->
//! objective ([`objective`]: one file per method, named loss terms; pure loss functions in
//! [`losses`]) -> backward -> [`optim::AdamW`] + the schedule -> checkpoint ([`checkpoint`],
//! atomic, exact resume) -> periodic grid evaluation -> final model in sentence-transformers
//! layout ([`export`]; [`export::slim`] drops layers). The loop is [`trainer::train`];
//! [`distill`] runs IBKD's two stages through it with a cached teacher.

pub mod checkpoint;
pub mod data;
pub mod distill;
pub mod error;
pub mod export;
pub mod losses;
pub mod objective;
/// The one AdamW, shared with `nest-compress`; it lives in `nest-model` (see its docs).
pub use nest_model::optim;
pub mod recipe;
mod schedule;
pub mod trainer;

pub use error::{Error, Result};
pub use recipe::Recipe;
