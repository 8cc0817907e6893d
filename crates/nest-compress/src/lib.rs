//! Nest compression: adaptors that shrink a *frozen* model's embeddings while keeping retrieval
//! quality (SMEC, Zhang et al. 2025, `shared/papers/SMEC.md`), with the baselines the paper
//! compares against.
//!
//! - [`data`]: embedding matrices (`.npy`, `.safetensors`) with ids, qrels, the train/validation
//!   split, and the on-disk cache of a model's embeddings of a BEIR folder.
//! - [`loss`]: the rank loss (eq. 8), the unsupervised similarity-preservation loss (eq. 7) and
//!   Matryoshka-Adaptor's in-batch pairwise term.
//! - [`ads`]: Adaptive Dimension Selection (section 3.3): Gumbel-softmax importance, top-k.
//! - [`memory`]: S-XBM (section 3.4): a FIFO of frozen embeddings queried for top-k neighbours.
//! - [`train`]: one engine for every trained method (phases of nested dims, sequential or
//!   parallel, truncation or ADS, batch or memory neighbours); [`method`] names the presets.
//! - [`pca`]: the PCA baseline as an adaptor; [`eval`]: nDCG@10 of an adaptor on qrels.
//!
//! Every method produces a [`nest_model::Adaptor`]: a linear map per head whose output prefixes
//! are the compressed vectors, which `nest encode --adaptor` and `nest eval --adaptor` apply.

pub mod ads;
pub mod config;
pub mod data;
pub mod error;
pub mod eval;
pub mod job;
pub mod loss;
pub mod memory;
pub mod method;
pub mod pca;
mod phase;
pub mod run;
pub mod train;
mod trained;

pub use error::{Error, Result};
pub use method::Method;
pub use trained::EpochLog;
