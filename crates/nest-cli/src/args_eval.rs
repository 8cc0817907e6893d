//! Arguments of the evaluation commands: `nest eval` (its grid, and its `sts`, `compare` and
//! `seeds` subcommands), `nest advise` and `nest inspect`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::args_model::{EvalPromptArgs, ModelArgs};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub sub: Option<EvalCommand>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Task families: sts, cls, pair, retrieval (comma-separated).
    #[arg(long, default_value = "sts,cls,pair,retrieval")]
    pub tasks: String,
    /// Folder holding the datasets (stsb/, sick-r/, banking77/, ... as in shared/datasets).
    #[arg(long, default_value = "../shared/datasets")]
    pub data_root: PathBuf,
    /// More STS files (TSV: sentence1, sentence2, score) in the sts family, e.g. STS12-16's
    /// test sets for the papers' 7-task average; report.md then has the average over every STS
    /// task per cell.
    #[arg(long, value_delimiter = ',')]
    pub sts_extra: Vec<PathBuf>,
    /// More retrieval tasks in the retrieval family: BEIR-layout folders (corpus.jsonl,
    /// queries.jsonl, qrels/SPLIT.tsv), as `DIR` (the test split) or `DIR:SPLIT`.
    #[arg(long, value_delimiter = ',')]
    pub retrieval_extra: Vec<String>,
    #[command(flatten)]
    pub grid: GridArgs,
}

#[derive(Debug, Args, Clone)]
pub struct GridArgs {
    /// Layers, e.g. `1-6` or `2,4,6` (default: all).
    #[arg(long)]
    pub layers: Option<String>,
    /// Prefix dims, e.g. `16,32,64,128,256,384` (default: powers of two from 16, and the hidden size).
    #[arg(long)]
    pub dims: Option<String>,
    /// Storage precisions: float32, int8, binary.
    #[arg(long, default_value = "float32")]
    pub precision: String,
    /// Binary retrieval: re-rank the top 10 x N Hamming candidates with the float query (0: off).
    #[arg(long, default_value_t = 4)]
    pub rescore: usize,
    /// Texts timed per layer for the latency cost (0: skip the measurement).
    #[arg(long, default_value_t = 512)]
    pub latency_texts: usize,
    /// Where report.json, report.md and the plots go.
    #[arg(long, default_value = crate::cmd::eval_out::LATEST)]
    pub out: PathBuf,
    /// Replace a report of another model in `--out` (`reports/latest`, the default, is
    /// replaced without it).
    #[arg(long)]
    pub overwrite: bool,
    /// Apply an adaptor made by `nest compress` to every vector (dims default to its dims).
    #[arg(long)]
    pub adaptor: Option<PathBuf>,
    /// Leave the per-item scores (each pair's similarity, each query's nDCG@10, each
    /// example's prediction) out of report.json; `nest eval compare` then cannot test
    /// significance.
    #[arg(long)]
    pub no_items: bool,
    #[command(flatten)]
    pub prompts: EvalPromptArgs,
}

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// STS on given files: Spearman x100 of cosine vs gold per (layer, dim, precision).
    Sts(Box<EvalStsArgs>),
    /// Per-cell deltas of reports against the first, with paired-bootstrap intervals and
    /// Holm-corrected significance: prints tables, writes compare.md, compare.json and plots.
    Compare(CompareArgs),
    /// Several runs of one method (seeds): mean, sd and 95% t-interval per cell.
    Seeds(SeedsArgs),
}

#[derive(Debug, Args)]
pub struct SeedsArgs {
    /// report.json of each run (2 or more), or the folders holding them.
    #[arg(required = true, num_args = 2..)]
    pub reports: Vec<PathBuf>,
    /// Where seeds.md and seeds.json go (default: beside the first report).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct EvalStsArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// STS-layout TSV files (sentence1, sentence2, score); repeat or comma-separate.
    #[arg(long, required = true, value_delimiter = ',')]
    pub data: Vec<PathBuf>,
    #[command(flatten)]
    pub grid: GridArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// report.json files (or their folders); each after the first is compared with the first.
    /// Several runs of one method (seeds) make one side when comma-separated:
    /// `a1.json,a2.json,a3.json`.
    #[arg(required = true, num_args = 2..)]
    pub reports: Vec<String>,
    /// Where compare.md, compare.json and the heatmaps go (default: beside each compared
    /// report); with three sides or more, one folder per compared side inside it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Paired-bootstrap resamples over the test items per cell (0: no significance test).
    #[arg(long, default_value_t = 1000)]
    pub resamples: usize,
    /// Seed of the bootstrap's draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Family-wise error rate of Holm's correction over all cells compared.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Pair each side's full vector (the largest dim all its reports scored) instead of the
    /// dims both sides scored: for outputs of different widths, e.g. IBKD's `W s` (the
    /// teacher's 768 dims) against a 384-dim student. The table shows the first side's dim.
    #[arg(long)]
    pub full_dim: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("floor").required(true).args(["min_score", "within"])))]
pub struct AdviseArgs {
    /// A report.json from `nest eval`; several (comma-separated, e.g. the per-dtype reports of
    /// `nest eval --dtype float32,bf16,int8`) to choose the arithmetic too.
    #[arg(long, value_delimiter = ',', required = true)]
    pub report: Vec<PathBuf>,
    /// The quality floor, in the report's units (x100).
    #[arg(long, allow_negative_numbers = true)]
    pub min_score: Option<f64>,
    /// The floor as a distance below the full point (deepest layer, all dims, float32), e.g.
    /// `--within 2` = at most 2 points below the full model.
    #[arg(long)]
    pub within: Option<f64>,
    /// A task name (e.g. stsb/test), a kind (sts, cls, pair, retrieval: their tasks' main
    /// metrics averaged) or `all`.
    #[arg(long, default_value = "all")]
    pub task: String,
    /// Cost to minimise first: latency or memory.
    #[arg(long, default_value = "latency")]
    pub by: String,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Texts: an STS TSV (pairs with score >= --positive-min are the positives for alignment) or
    /// a text file with one sentence per line.
    #[arg(long, default_value = "../shared/datasets/stsb/test.tsv")]
    pub data: PathBuf,
    /// Layer to inspect (default: the last).
    #[arg(long)]
    pub layer: Option<usize>,
    /// Prefix length for the prefix/residual cross-correlation (default: a quarter of the hidden size).
    #[arg(long)]
    pub dim: Option<usize>,
    /// Matryoshka boundaries to mark and to compute prefix statistics at (default: the model's
    /// trained dims, else powers of two from 16).
    #[arg(long)]
    pub boundaries: Option<String>,
    /// STS gold score from which a pair counts as positive.
    #[arg(long, default_value_t = 4.0)]
    pub positive_min: f64,
    #[arg(long, default_value = "reports/inspect")]
    pub out: PathBuf,
}
