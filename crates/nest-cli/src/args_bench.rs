//! Arguments of `nest bench encode` and `nest bench train` (the serving and search benchmarks'
//! are in args_search.rs).

use std::path::PathBuf;

use clap::Args;

use crate::args_model::ModelArgs;

#[derive(Debug, Args)]
pub struct BenchTrainArgs {
    #[arg(long, default_value = crate::args_model::DEFAULT_MODEL)]
    pub model: String,
    /// A TSV whose first two columns are anchor / positive (e.g. SNLI triplets).
    #[arg(long, default_value = "../shared/datasets/snli/triplets_dev.tsv")]
    pub data: PathBuf,
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    #[arg(long, default_value_t = 32)]
    pub max_length: usize,
    #[arg(long, default_value = "16,32,64,128,256,384")]
    pub dims: String,
    /// Timed steps (after 3 warm-up steps); the median is reported.
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
    /// The teacher of the `ibkd` and `distill` objectives (its vectors come through the cache).
    #[arg(long, default_value = "models/all-mpnet-base-v2")]
    pub teacher: String,
    /// Objectives whose step times are compared with MRL's in the same run, interleaved on the
    /// same batches (`mrl`, `2dmse`, `ese`, `distill`, and the compositions `mipic`, `mic`,
    /// `mipic+mic`, `ibkd` (MNRL + cached-teacher InfoNCE + HSIC); the first is the reference).
    #[arg(long, default_value = "mrl,2dmse,ese")]
    pub objectives: String,
    /// The training arithmetic: float32, or bf16 mixed precision (then the Python side runs
    /// torch.autocast bf16 and sentence-transformers with bf16=True).
    #[arg(long, default_value = "float32")]
    pub dtype: nest_model::Dtype,
    /// Pairs in the one-epoch end-to-end comparison.
    #[arg(long, default_value_t = 1024)]
    pub epoch_pairs: usize,
    /// A Python with torch, transformers and sentence-transformers[train]: runs
    /// scripts/bench/bench_train.py in the same run.
    #[arg(long, env = "NEST_PYTHON")]
    pub python: Option<PathBuf>,
    /// Append the figures as Markdown to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Record each objective's step as a CUDA graph per input shape and replay it, where the
    /// objective can be (all but ESE) (auto: on a GPU, as `nest train` does by default; on:
    /// also on the CPU, through the fake that runs the step eagerly; off).
    #[arg(long, default_value = "auto")]
    pub cuda_graph: nest_train::trainer::GraphMode,
    /// GradCache chunks of this many pairs (0: off), on both sides: Nest's recipe key
    /// `mini_batch_size` (its chunk passes recorded as CUDA graphs with --cuda-graph), GradCache
    /// by hand in the PyTorch step, CachedMultipleNegativesRankingLoss in sentence-transformers.
    #[arg(long, default_value_t = 0)]
    pub mini_batch_size: usize,
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
    /// A Python with sentence-transformers: runs scripts/bench/bench_st.py on the same sentences in
    /// the same run and prints the ratios.
    #[arg(long, env = "NEST_PYTHON")]
    pub python: Option<PathBuf>,
    /// The sentence-transformers configurations timed with `--python`: torch-float32,
    /// torch-bf16, onnx, onnx-int8 (dynamic, avx512_vnni), openvino, openvino-bf16 (the last
    /// four only at the model's full depth).
    #[arg(long, default_value = "torch-float32")]
    pub peers: String,
    /// Append the figures as a Markdown table to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Also time encoding through this adaptor (at its smallest dim) and print the overhead.
    #[arg(long)]
    pub adaptor: Option<PathBuf>,
    /// The tokenizer's cache of words' ids in the timed passes: `cold` forgets it before each
    /// pass (every pass meets these texts' words for the first time, as a one-off encode of a
    /// corpus), `warm` keeps it (as a server that has seen these words before).
    #[arg(long, value_enum, default_value = "cold")]
    pub words: WordsCache,
    /// After the timed passes, run one more pass per layer under libtorch's profiler and write
    /// its trace (Chrome trace JSON: host operators, and a GPU's kernels with their times) into
    /// this folder, as `<run>-layer<L>.json` (`scripts/gpu/trace_summary.py` sums one).
    #[arg(long)]
    pub profile: Option<PathBuf>,
}

/// [`BenchEncodeArgs::words`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WordsCache {
    Cold,
    Warm,
}
