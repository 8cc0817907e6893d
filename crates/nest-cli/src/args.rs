use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "nest",
    version,
    about = "Elastic text embeddings: Matryoshka dims x early-exit layers"
)]
pub struct Cli {
    /// libtorch intra-op threads (default: libtorch's choice, the number of physical cores).
    #[arg(long, global = true)]
    pub threads: Option<i32>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Embed sentences at one (layer, dim) point.
    Encode(EncodeArgs),
    /// Evaluate a model over the (layer x dim) grid.
    #[command(subcommand)]
    Eval(EvalCommand),
    /// Print a model's architecture, elastic axes and what it was trained for.
    Info(InfoArgs),
    /// Benchmarks that print figures.
    #[command(subcommand)]
    Bench(BenchCommand),
}

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
}

#[derive(Debug, Args)]
pub struct EncodeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Layers to compute (early exit); default: all.
    #[arg(long)]
    pub layer: Option<usize>,
    /// Prefix dimensions to keep (Matryoshka truncation); default: all.
    #[arg(long)]
    pub dim: Option<usize>,
    /// Input: text with one sentence per line, or JSONL with a "text" field.
    #[arg(long)]
    pub input: PathBuf,
    /// Output: .npy, .safetensors or .jsonl.
    #[arg(long)]
    pub output: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Semantic textual similarity: Spearman x100 of cosine vs gold per (layer, dim).
    Sts(EvalStsArgs),
}

#[derive(Debug, Args)]
pub struct EvalStsArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// STS-layout TSV files (sentence1, sentence2, score); repeat or comma-separate.
    #[arg(long, required = true, value_delimiter = ',')]
    pub data: Vec<PathBuf>,
    /// Layers, e.g. `1-6` or `2,4,6` (default: all).
    #[arg(long)]
    pub layers: Option<String>,
    /// Prefix dims, e.g. `16,32,64,128,256,384` (default: powers of two up to the hidden size, and it).
    #[arg(long)]
    pub dims: Option<String>,
    /// Where report.json, report.md and the heatmaps go.
    #[arg(long, default_value = "reports/latest")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    #[arg(long, default_value = "models/all-MiniLM-L6-v2")]
    pub model: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Encode throughput per layer, next to sentence-transformers when a Python is given.
    Encode(BenchEncodeArgs),
}

#[derive(Debug, Args)]
pub struct BenchEncodeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// STS-layout TSV whose sentences (both columns) are encoded.
    #[arg(long, default_value = "../shared/datasets/stsb/test.tsv")]
    pub data: PathBuf,
    /// Layers to time.
    #[arg(long, default_value = "2,3,6")]
    pub layers: String,
    /// Timed repetitions per layer (the best is reported, after one warm-up pass).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// A Python with sentence-transformers: runs scripts/bench_st.py on the same sentences in
    /// the same run and prints the ratios.
    #[arg(long, env = "NEST_PYTHON")]
    pub python: Option<PathBuf>,
    /// Append the figures as a Markdown table to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}
