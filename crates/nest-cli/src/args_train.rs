//! Arguments of the commands that train: `nest train`, `nest distill` and `nest compress` (an
//! adaptor on frozen embeddings).

use std::path::PathBuf;

use clap::Args;

/// A path, where an empty one stands for a flag given without its value (clap's own path
/// parser refuses empty values).
fn path_or_empty(s: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(s))
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Recipe file (TOML); see recipes/.
    #[arg(long)]
    pub recipe: Option<PathBuf>,
    /// Run directory (default: runs/<recipe name>).
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Continue the run in this directory from its last checkpoint (alone: the `--run-dir`
    /// run); `auto`: continue the `--run-dir` run if it has one, start it otherwise (for
    /// `torchrun --max-restarts`).
    #[arg(long, value_name = "RUN_DIR|auto", num_args = 0..=1, default_missing_value = "",
          value_parser = path_or_empty)]
    pub resume: Option<PathBuf>,
    /// Replace the run the directory holds: checked inputs first, then its files move to
    /// `RUN/.replaced/`, deleted once the new run finished (put back if it fails).
    /// Contradicts `--resume`.
    #[arg(long)]
    pub overwrite: bool,
    /// Resume a checkpoint written by another number of processes (the run is then no longer
    /// bit-exact: dropout masks and summation order change).
    #[arg(long)]
    pub allow_world_change: bool,
    /// Resume on training data other than the checkpoint's (refused otherwise: the batches from
    /// the checkpoint on are then the new data's plan, not the run's).
    #[arg(long)]
    pub allow_data_change: bool,
    /// One run per seed, e.g. `--seeds 1,2,3`: each in `<run dir>-seed<S>` with the recipe's
    /// `seed` set to S, started or continued where it stopped; evaluate each and pass the
    /// reports comma-separated to `nest eval compare` for mean, spread and paired intervals.
    #[arg(long, value_delimiter = ',')]
    pub seeds: Vec<u64>,
    /// Recipe keys as flags: `--lr 3e-5 --matryoshka-dims 16,32 --data file.tsv:scored`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_name = "--KEY VALUE")]
    pub overrides: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DistillArgs {
    /// Distillation recipe (TOML: teacher, student, [stage1], [stage2]); see recipes/ibkd.toml.
    /// Required. Like every flag here, it may come before or after the stage keys.
    #[arg(long)]
    pub recipe: Option<PathBuf>,
    /// The teacher model (overrides the recipe's).
    #[arg(long)]
    pub teacher: Option<String>,
    /// The student model to start from (overrides the recipe's).
    #[arg(long)]
    pub student: Option<String>,
    /// Run directory: stage1/ and stage2/ inside (default: runs/<recipe name>).
    #[arg(long)]
    pub run_dir: Option<PathBuf>,
    /// Which stages: 1, 2 or all. A finished stage is skipped; one whose keys changed is
    /// refused (the changed keys named) unless `--overwrite` reruns it.
    #[arg(long, default_value = "all")]
    pub stage: String,
    /// Continue a cut stage from its last checkpoint.
    #[arg(long)]
    pub resume: bool,
    /// Rerun the chosen stages: an unfinished one from scratch, a finished one too.
    #[arg(long)]
    pub overwrite: bool,
    /// Stage keys as flags: `--stage1.lr 1e-4 --stage2.epochs 1`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_name = "--stageN.KEY VALUE")]
    pub overrides: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompressArgs {
    /// smec (default), mrl, mrl+smrl, mrl+ads, mrl+sxbm, matryoshka-adaptor, search-adaptor,
    /// pca, truncate; with `--resume`, the adaptor's own.
    #[arg(long)]
    pub method: Option<String>,
    /// Output dims, increasing as everywhere (doubling for smec and mrl+smrl), e.g.
    /// `96,192,384,768`; with `--resume`, the new smaller dims to add. The decreasing order
    /// of earlier releases is accepted too.
    #[arg(long)]
    pub dims: String,
    /// Where the adaptor goes (adaptor.json + adaptor.safetensors).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace the adaptor `--out` holds already (refused without it).
    #[arg(long)]
    pub overwrite: bool,
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
    /// Sequential stages stop after this many epochs without a better validation loss. Default:
    /// no early stop (0 too): each stage gets --epochs, the parallel methods' budget, and keeps
    /// its best validation epoch (early stopping at 3 cost SMEC 3.6 nDCG@10 at 48 dims;
    /// docs/COMPRESSION.md, "Levers").
    #[arg(long)]
    pub patience: Option<usize>,
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
    /// ADS's gradient to its logits: `straight-through` (the kept dims' values unchanged) or
    /// `soft` (the kept dims weighted by their Gumbel-softmax probabilities, eq. 6's path).
    #[arg(long, default_value = "straight-through", value_parser = ["straight-through", "soft"])]
    pub ads_gradient: String,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}
