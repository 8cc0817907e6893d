//! `nest mine`'s flags: sentence-transformers 6.2.0 `mine_hard_negatives`' arguments under
//! their names (defaults equal), plus the elastic point (`--layer`, `--dim`, `--precision`).

use std::path::PathBuf;

use clap::Args;

use crate::args_model::{EvalPromptArgs, ModelArgs};

#[derive(Debug, Args)]
pub struct MineArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// (query, positive) pairs: .jsonl with `anchor` or `query` and `positive` or `answer`, or
    /// a TSV with such columns in its header (other columns ignored).
    #[arg(long, required_unless_present = "beir", conflicts_with = "beir")]
    pub queries: Option<PathBuf>,
    /// A BEIR folder instead of --queries: the split's queries, their positives from the qrels
    /// (relevance > 0), the corpus from corpus.jsonl (unless --corpus).
    #[arg(long)]
    pub beir: Option<PathBuf>,
    /// The qrels split of --beir.
    #[arg(long, default_value = "train", requires = "beir")]
    pub split: String,
    /// Candidate negatives: .jsonl (`text`, optional `title` prefixed as in BEIR) or one text
    /// per line. Default: the positives (as sentence-transformers). Exact duplicates are
    /// dropped and positives it lacks are added, as sentence-transformers does.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// The output (JSON lines: a `.jsonl` name). Written as OUTPUT.partial +
    /// OUTPUT.mine-state.json while it runs; the same command resumes after an interruption.
    #[arg(long)]
    pub output: PathBuf,
    /// Replace a finished output, or drop an unfinished run of another command.
    #[arg(long)]
    pub overwrite: bool,
    /// Exit: encode with this many layers (default: all).
    #[arg(long)]
    pub layer: Option<usize>,
    /// Matryoshka prefix to score with (default: the model's default dim).
    #[arg(long)]
    pub dim: Option<usize>,
    /// How vectors are scored: float32, int8 or binary, stored and scored as `nest index` does.
    #[arg(long, default_value = "float32")]
    pub precision: String,
    /// Negatives per query.
    #[arg(long, default_value_t = 3)]
    pub num_negatives: usize,
    /// Skip this many best candidates (ranks count candidates left after the filters).
    #[arg(long, default_value_t = 0)]
    pub range_min: usize,
    /// Consider candidates up to this rank. Default: range-min + num-negatives + the most
    /// positives of a query, or range-min + 10 x num-negatives + that with a margin or
    /// --max-score (sentence-transformers' rule).
    #[arg(long)]
    pub range_max: Option<usize>,
    /// Drop candidates scoring above this.
    #[arg(long, allow_hyphen_values = true)]
    pub max_score: Option<f32>,
    /// Drop candidates scoring below this.
    #[arg(long, allow_hyphen_values = true)]
    pub min_score: Option<f32>,
    /// Drop candidates with score + margin > the query's lowest positive score.
    #[arg(long, allow_hyphen_values = true)]
    pub absolute_margin: Option<f32>,
    /// Drop candidates with score > p - |p| x margin, p the query's lowest positive score.
    #[arg(long, allow_hyphen_values = true)]
    pub relative_margin: Option<f32>,
    /// top: the best of the rank window; random: a seeded draw from it (see --seed).
    #[arg(long, default_value = "top")]
    pub sampling: String,
    /// Seed of --sampling random (each query draws from its own SplitMix64 stream).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// triplet, n-tuple, labeled-pair or labeled-list (sentence-transformers' output_format).
    #[arg(long, default_value = "triplet")]
    pub output_format: String,
    /// Add the scores (sentence-transformers' output_scores).
    #[arg(long)]
    pub output_scores: bool,
    /// Keep the positives among the candidates (forces n-tuple, as sentence-transformers).
    #[arg(long)]
    pub include_positives: bool,
    /// After mining, report how many of this output's negatives another mined file (e.g. the
    /// full point's, or sentence-transformers') also holds for the same anchor and positive.
    #[arg(long)]
    pub overlap_with: Option<PathBuf>,
    /// Read the corpus's vectors memory-mapped from this Nest index (`nest index build --model`
    /// with this model, at the mining layer, storing the --precision:--dim level) instead of
    /// encoding them; its documents' texts come from --corpus (or the BEIR folder's
    /// corpus.jsonl), the file it was built from (ids and count checked).
    #[arg(long)]
    pub corpus_index: Option<PathBuf>,
    /// Texts per encoder call (a text is always encoded in the same block: the unit that makes
    /// runs split by rank and resumed runs encode the same vectors).
    #[arg(long, default_value_t = nest_train::mine::DEFAULT_ENCODE_CHUNK, hide = true)]
    pub encode_chunk: usize,
    /// Queries mined and written per chunk (the unit of resumption).
    #[arg(long, default_value_t = 1024, hide = true)]
    pub chunk_queries: usize,
    #[command(flatten)]
    pub prompts: EvalPromptArgs,
}
