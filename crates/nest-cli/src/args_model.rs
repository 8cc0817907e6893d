//! The model flags every model-loading command shares (`nest encode`, `eval`, `inspect`,
//! `index build`, `bench encode`, ...): a leaf module, so that the other argument modules import
//! it without importing each other.

use clap::Args;

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// A local model directory (Hugging Face / sentence-transformers layout) or a hub id
    /// `org/name` (downloaded when the machine has internet).
    #[arg(long, default_value = "models/all-MiniLM-L6-v2")]
    pub model: String,
    /// Truncate inputs to this many tokens (default: the model's max_seq_length).
    #[arg(long)]
    pub max_length: Option<usize>,
    /// Sentences per forward pass.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// The arithmetic: auto (bf16 where it measured faster on this machine, else float32),
    /// float32, bf16 or int8 (dynamic quantisation). `nest eval` and `nest bench encode` take a
    /// list and score / time each. Not how vectors are stored: that is `--precision`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "auto",
        env = "NEST_DTYPE"
    )]
    pub dtype: Vec<nest_model::DtypeChoice>,
}

