//! The command line: [`Cli`], its subcommands ([`Command`]) and the arguments of `encode`,
//! `slim`, `info` and `bench`; the other commands' arguments are in `args_eval.rs` (`eval`,
//! `advise`, `inspect`), `args_train.rs` (`train`, `distill`, `compress`), `args_search.rs`
//! and `args_bench.rs`, which import `args_model.rs` and never this file.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use crate::args_eval::{
    AdviseArgs, CompareArgs, EvalArgs, EvalCommand, GridArgs, InspectArgs, SeedsArgs,
};
pub use crate::args_model::{ModelArgs, PromptArgs};
pub use crate::args_train::{CompressArgs, DistillArgs, TrainArgs};

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
#[allow(clippy::large_enum_variant)] // parsed once; boxing buys nothing
pub enum Command {
    /// Embed sentences at one (layer, dim) point.
    Encode(EncodeArgs),
    /// Evaluate a model over the (layer x dim x precision) grid: `nest eval --tasks ...`,
    /// `nest eval sts --data FILE`, `nest eval compare A B`.
    Eval(EvalArgs),
    /// Name the cheapest (layer, dim, precision) of a report that meets a quality floor.
    Advise(AdviseArgs),
    /// Diagnostics of an embedding space: variance profile, prefix/residual correlation,
    /// alignment/uniformity, effective rank.
    Inspect(InspectArgs),
    /// Train (fine-tune) an elastic model from a recipe; any recipe key is also a `--key value` flag.
    Train(TrainArgs),
    /// Distil a teacher into an elastic student (IBKD: distillation, then fine-tuning), resumable.
    Distill(DistillArgs),
    /// Print a model's architecture, elastic axes and what it was trained for.
    Info(InfoArgs),
    /// Write a smaller model with only the first n layers (and optionally a default dim).
    Slim(SlimArgs),
    /// Train an adaptor that compresses a frozen model's embeddings (SMEC and baselines).
    Compress(CompressArgs),
    /// Build or inspect a search index (several dims and precisions per vector).
    #[command(subcommand)]
    Index(crate::args_search::IndexCommand),
    /// Search an index with a funnel (coarse-to-fine), in Nest or in PostgreSQL + pgvector.
    Search(crate::args_search::SearchArgs),
    /// Mine hard negatives for (query, positive) pairs at any (layer, dim, precision) point, as
    /// sentence-transformers' mine_hard_negatives; resumable.
    Mine(crate::args_mine::MineArgs),
    /// Export an index elsewhere (PostgreSQL + pgvector), or a training checkpoint as a model.
    #[command(subcommand)]
    Export(crate::args_search::ExportCommand),
    /// Serve an OpenAI-compatible embeddings API with per-request dims and layers.
    Serve(crate::args_search::ServeArgs),
    /// Benchmarks that print figures.
    #[command(subcommand)]
    Bench(BenchCommand),
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
    /// Input: text with one sentence per line, or JSONL with a "text" field; `-` reads text
    /// lines from standard input.
    #[arg(long)]
    pub input: PathBuf,
    /// Output: .npy, .safetensors or .jsonl; `-` writes JSON lines to standard output.
    #[arg(long)]
    pub output: PathBuf,
    /// Apply an adaptor made by `nest compress` (then `--dim` is one of its dims).
    #[arg(long)]
    pub adaptor: Option<PathBuf>,
    /// Texts embedded between two saves of their vectors (beside `--output`, until it is
    /// written): a cut run, run again, embeds only what it had not saved.
    #[arg(long, default_value_t = 2048, hide = true)]
    pub encode_chunk: usize,
    #[command(flatten)]
    pub prompt: PromptArgs,
}

#[derive(Debug, Args)]
pub struct SlimArgs {
    /// The model to slim (e.g. a 2DMSE run's `final/`).
    #[arg(long)]
    pub model: String,
    /// How many layers to keep (the first n). Was `--layers`, which elsewhere names a list of
    /// exits; that spelling stays as a hidden alias for one release.
    #[arg(long = "keep-layers", alias = "layers")]
    pub layers: usize,
    /// Record this dim as the default truncation (Nest applies it unless `--dim` says otherwise).
    #[arg(long)]
    pub dim: Option<usize>,
    /// Output directory (new, or empty; `--overwrite` replaces one that holds files).
    #[arg(long)]
    pub out: PathBuf,
    /// Replace the model an `--out` folder holds (never the model's own folder, nor a folder
    /// without a model).
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// A model folder (as `--model`), or an adaptor folder (`nest compress --out`).
    #[arg(value_name = "PATH", conflicts_with = "model")]
    pub path: Option<String>,
    #[arg(long, default_value = crate::args_model::DEFAULT_MODEL)]
    pub model: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Encode throughput per layer, next to sentence-transformers when a Python is given.
    Encode(crate::args_bench::BenchEncodeArgs),
    /// One MRL(MNRL) training step and one training epoch, next to plain PyTorch and
    /// sentence-transformers when a Python is given; peak memory; achieved GFLOP/s.
    Train(crate::args_bench::BenchTrainArgs),
    /// Load a running embeddings server (Nest's or a peer's) with concurrent clients.
    Serve(crate::args_search::BenchServeArgs),
    /// Recall@k (relative to exact search) and QPS of funnels over an index.
    Search(crate::args_search::BenchSearchArgs),
    /// Soak a running Nest server: valid, oversized, malformed and unauthorised requests from
    /// many clients, each answer's status checked; p99 latency and memory sampled; a queue-full
    /// burst and recovery.
    Soak(crate::args_search::BenchSoakArgs),
}
