use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use crate::args_model::{EvalPromptArgs, ModelArgs, PromptArgs};

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
    /// Export an index elsewhere (PostgreSQL + pgvector).
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
    /// Input: text with one sentence per line, or JSONL with a "text" field.
    #[arg(long)]
    pub input: PathBuf,
    /// Output: .npy, .safetensors or .jsonl.
    #[arg(long)]
    pub output: PathBuf,
    /// Apply an adaptor made by `nest compress` (then `--dim` is one of its dims).
    #[arg(long)]
    pub adaptor: Option<PathBuf>,
    #[command(flatten)]
    pub prompt: PromptArgs,
}

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
    #[arg(long, default_value = "reports/latest")]
    pub out: PathBuf,
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
    /// report.json of each run (2 or more).
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
    /// report.json files; each after the first is compared with the first. Several runs of one
    /// method (seeds) make one side when comma-separated: `a1.json,a2.json,a3.json`.
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
}

#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// A report.json from `nest eval`; several (comma-separated, e.g. the per-dtype reports of
    /// `nest eval --dtype float32,bf16,int8`) to choose the arithmetic too.
    #[arg(long, value_delimiter = ',', required = true)]
    pub report: Vec<PathBuf>,
    /// The quality floor, in the report's units (x100).
    #[arg(
        long,
        allow_negative_numbers = true,
        required_unless_present = "within",
        conflicts_with = "within"
    )]
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

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Recipe file (TOML); see recipes/.
    #[arg(long)]
    pub recipe: Option<PathBuf>,
    /// Run directory (default: runs/<recipe name>).
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Continue the run in this directory from its last checkpoint; `auto`: continue the
    /// `--run-dir` run if it has one, start it otherwise (for `torchrun --max-restarts`).
    #[arg(long, value_name = "RUN_DIR|auto")]
    pub resume: Option<PathBuf>,
    /// Replace whatever run the directory holds.
    #[arg(long)]
    pub overwrite: bool,
    /// Resume a checkpoint written by another number of processes (the run is then no longer
    /// bit-exact: dropout masks and summation order change).
    #[arg(long)]
    pub allow_world_change: bool,
    /// One run per seed, e.g. `--seeds 1,2,3`: each in `<run dir>-seed<S>` with the recipe's
    /// `seed` set to S, started or continued where it stopped; evaluate each and pass the
    /// reports comma-separated to `nest eval compare` for mean, spread and paired intervals.
    #[arg(long, value_delimiter = ',')]
    pub seeds: Vec<u64>,
    /// Recipe keys as flags: `--lr 3e-5 --matryoshka-dims "[16, 32]" --data file.tsv:scored`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_name = "--KEY VALUE")]
    pub overrides: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DistillArgs {
    /// Distillation recipe (TOML: teacher, student, [stage1], [stage2]); see recipes/ibkd.toml.
    #[arg(long)]
    pub recipe: PathBuf,
    /// The teacher model (overrides the recipe's).
    #[arg(long)]
    pub teacher: Option<String>,
    /// The student model to start from (overrides the recipe's).
    #[arg(long)]
    pub student: Option<String>,
    /// Run directory: stage1/ and stage2/ inside (default: runs/<recipe name>).
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Which stages: 1, 2 or all. A finished stage is never rerun.
    #[arg(long, default_value = "all")]
    pub stage: String,
    /// Continue a cut stage from its last checkpoint.
    #[arg(long)]
    pub resume: bool,
    /// Replace a stage's unfinished run.
    #[arg(long)]
    pub overwrite: bool,
    /// Stage keys as flags: `--stage1.lr 1e-4 --stage2.epochs 1`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_name = "--stageN.KEY VALUE")]
    pub overrides: Vec<String>,
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
    /// Output directory (replaced if it exists).
    #[arg(long)]
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

#[derive(Debug, Args)]
pub struct CompressArgs {
    /// smec, mrl, mrl+smrl, mrl+ads, mrl+sxbm, matryoshka-adaptor, search-adaptor, pca, truncate.
    #[arg(long, default_value = "smec")]
    pub method: String,
    /// Output dims, increasing as everywhere (doubling for smec and mrl+smrl), e.g.
    /// `96,192,384,768`; with `--resume`, the new smaller dims to add. The decreasing order
    /// of earlier releases is accepted too.
    #[arg(long)]
    pub dims: String,
    /// Where the adaptor goes (adaptor.json + adaptor.safetensors).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue a saved smec / mrl+smrl adaptor with smaller stages (its inputs are reused).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// Corpus embeddings: .npy or .safetensors, `[N, D]`.
    #[arg(long)]
    pub embeddings: Option<PathBuf>,
    /// Corpus ids, one per line (default: row numbers).
    #[arg(long)]
    pub corpus_ids: Option<PathBuf>,
    /// Query embeddings: .npy or .safetensors.
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// Query ids, one per line (default: row numbers).
    #[arg(long)]
    pub query_ids: Option<PathBuf>,
    /// Training qrels (BEIR TSV: query-id, corpus-id, score).
    #[arg(long)]
    pub qrels: Option<PathBuf>,
    /// Test qrels, scored once at the end (never used for a choice).
    #[arg(long)]
    pub test_qrels: Option<PathBuf>,
    /// Or: a model whose embeddings of a BEIR folder are computed (once, cached).
    #[arg(long)]
    pub model: Option<String>,
    /// The BEIR folder (corpus.jsonl, queries.jsonl, qrels/).
    #[arg(long)]
    pub beir: Option<PathBuf>,
    /// The BEIR qrels split to train on; `test` is scored at the end when present.
    #[arg(long, default_value = "train")]
    pub split: String,
    /// Where the model's embeddings are cached.
    #[arg(long, default_value = ".nest-cache/embeddings")]
    pub cache: PathBuf,
    /// Share of the training queries held out for stopping and choices.
    #[arg(long, default_value_t = 0.2)]
    pub val_fraction: f64,
    /// Weight of the unsupervised loss (eq. 9).
    #[arg(long, default_value_t = 1.0)]
    pub alpha: f64,
    /// Similarity scale inside the rank loss (chosen on SciFact's validation split).
    #[arg(long, default_value_t = 10.0)]
    pub scale: f64,
    /// Adam learning rate (chosen on SciFact's validation split).
    #[arg(long, default_value_t = 3e-3)]
    pub lr: f64,
    /// Queries per batch.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Epochs (parallel methods), or the most epochs per stage (sequential).
    #[arg(long, default_value_t = 20)]
    pub epochs: usize,
    /// Sequential stages stop after this many epochs without a better validation loss.
    #[arg(long, default_value_t = 3)]
    pub patience: usize,
    /// Hard negatives per query (mined with the frozen embeddings).
    #[arg(long, default_value_t = 10)]
    pub hard_negatives: usize,
    /// Neighbours per item for the unsupervised loss (in-batch or S-XBM).
    #[arg(long, default_value_t = 10)]
    pub neighbours: usize,
    /// S-XBM memory size.
    #[arg(long, default_value_t = 5000)]
    pub memory_size: usize,
    /// ADS Gumbel-softmax temperature.
    #[arg(long, default_value_t = 1.0)]
    pub tau: f64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}
