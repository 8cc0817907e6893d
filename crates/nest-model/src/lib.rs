//! Nest encoders: BERT and MPNet with every layer's hidden states, early exit, pooling and
//! Matryoshka truncation.
//!
//! The entry point is [`ElasticEncoder::load`], which reads a model directory in Hugging Face /
//! sentence-transformers layout (or downloads one from the hub, see [`hub`]), and
//! [`ElasticEncoder::embed`] / [`ElasticEncoder::embed_layers`].
//!
//! One file per architecture ([`bert`], [`mpnet`]), each with a `new` that registers its weights
//! in a `tch::nn::VarStore` and a `forward`; the transformer block they share and the explicit
//! loop over layers that stops after the requested number of layers live in [`layer`].

pub mod adaptor;
mod attention;
pub mod backbone;
pub mod bert;
mod blocks;
pub mod config;
pub mod dense;
pub mod dtype;
pub mod encoder;
pub mod error;
pub mod export;
pub mod gemma3;
pub mod graph;
mod host_made;
pub mod hub;
pub mod io;
pub mod layer;
mod length_cache;
mod linear;
#[allow(unsafe_code)]
pub mod machine;
pub mod modernbert;
pub mod mpnet;
#[allow(unsafe_code)]
pub mod ops;
pub mod optim;
mod packing;
pub mod point;
pub mod pooling;
#[allow(unsafe_code)]
pub mod profile;
pub mod prompt;
pub mod qwen3;
mod row_blocks;
pub mod tiny;
pub mod tokenize;
mod weights;
pub mod xlm_roberta;

pub use adaptor::Adaptor;
pub use config::{Architecture, ModelConfig, ModelFiles, NestMeta};
pub use dense::{Dense, DenseConfig, Head};
pub use dtype::{Dtype, DtypeChoice};
pub use encoder::{
    ClsAttention, ElasticEncoder, EncodeOptions, EncoderInput, EncoderOutput, Exits,
};
pub use error::{Error, Result};
pub use packing::without_packing;
pub use point::{Keys, Offer, Point, Policy};
pub use pooling::Pooling;

/// libtorch's intra-op threads (this thread's count) shared out between `parts` threads that
/// run forward passes at once (encode streams, server workers): at least one each.
pub fn threads_each(parts: usize) -> i32 {
    (tch::get_num_threads().max(1) / parts.max(1) as i32).max(1)
}

/// Device selection: CUDA when built with the `cuda` feature and a GPU is present, else CPU.
/// Under a multi-process launch each process takes GPU `LOCAL_RANK` (modulo the GPUs it
/// sees), the variable torchrun sets and `nest_dist::Launch` reads; an unreadable value is
/// left to that reader's error.
pub fn default_device() -> tch::Device {
    if !cfg!(feature = "cuda") || !tch::Cuda::is_available() {
        return tch::Device::Cpu;
    }
    let local = std::env::var("LOCAL_RANK")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let count = usize::try_from(tch::Cuda::device_count())
        .unwrap_or(1)
        .max(1);
    tch::Device::Cuda(local % count)
}
