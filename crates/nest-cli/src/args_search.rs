//! Arguments of the serving and search commands (`index`, `search`, `export`, `serve`).

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use crate::args_model::ModelArgs;

#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Embed documents (or take precomputed vectors) and write an index holding every
    /// (dim, precision) level, in one pass.
    Build(Box<IndexBuildArgs>),
    /// Print an index's manifest (count, levels, source), after verifying its checksums.
    Info {
        #[arg(long)]
        index: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct IndexBuildArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Documents: `.jsonl` (`id`/`_id`, `text`, optional `title`, other fields = payload) or
    /// plain text, one document per line.
    #[arg(long)]
    pub input: PathBuf,
    /// Use these vectors (`.npy` / `.safetensors`, one row per document) instead of a model.
    #[arg(long)]
    pub embeddings: Option<PathBuf>,
    /// Layers to run (early exit; default: all).
    #[arg(long)]
    pub layer: Option<usize>,
    /// Prefix dims to store, e.g. `64,384` (default: the full dim).
    #[arg(long)]
    pub dims: Option<String>,
    /// Precisions to store at every dim: `float32,int8,binary`.
    #[arg(long, default_value = "float32")]
    pub precision: String,
    /// Store each document's other JSON fields beside it (returned by `nest search`).
    #[arg(long)]
    pub payload: bool,
    /// Store each document's text beside it (in its payload, as `text`), so that a search's hits
    /// show it; implies `--payload`.
    #[arg(long)]
    pub store_text: bool,
    #[arg(long)]
    pub out: PathBuf,
    /// Replace an existing index at `--out` (only once the new one is complete).
    #[arg(long)]
    pub overwrite: bool,
    /// With --overwrite, over an index a server has added documents to: carry them into the
    /// new index (their vectors as embedded; the input's document of the same id wins).
    #[arg(long, requires = "overwrite", conflicts_with = "drop_added")]
    pub keep_added: bool,
    /// With --overwrite, over an index a server has added documents to: rebuild without them.
    #[arg(long, requires = "overwrite")]
    pub drop_added: bool,
    /// Documents embedded between two saves of their vectors (beside `--out`, until the index
    /// is in place): a cut build, run again, embeds only what it had not saved.
    #[arg(long, default_value_t = 2048, hide = true)]
    pub encode_chunk: usize,
    /// The documents' prompt (default: the model's document prompt); the index records it.
    #[command(flatten)]
    pub prompt: crate::args_model::PromptArgs,
}

impl IndexBuildArgs {
    /// Whether the index stores payloads: `--payload`, or `--store-text` (the text goes there).
    pub fn stores(&self) -> bool {
        self.payload || self.store_text
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// Nest's own memory-mapped index.
    Nest,
    /// PostgreSQL + pgvector, through `--dsn`.
    Pgvector,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// The index (its manifest names the model and layer that embed the queries).
    #[arg(long)]
    pub index: Option<PathBuf>,
    /// A query text (repeatable).
    #[arg(long)]
    pub query: Vec<String>,
    /// The queries' prompt (default: the model's query prompt).
    #[command(flatten)]
    pub prompt: crate::args_model::PromptArgs,
    /// Only rows whose payload matches, e.g. `{"lang": "en"}` or `{"tag": {"$in": ["a", "b"]}}`
    /// (every key must match; --engine nest).
    #[arg(long)]
    pub filter: Option<String>,
    /// A file of queries, one per line (or `.jsonl` with `text`).
    #[arg(long)]
    pub queries: Option<PathBuf>,
    /// The cascade, e.g. `binary:384>float32:64>float32:384`; `@n` fixes a stage's shortlist.
    /// Default: exact search at the full dim.
    #[arg(long)]
    pub funnel: Option<String>,
    /// Results per query (`-k`, `--top-k`)
    #[arg(long, short = 'k', visible_alias = "top-k", default_value_t = 10)]
    pub k: usize,
    /// Embed queries with this model instead of the one the index records.
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long, value_enum, default_value_t = Engine::Nest)]
    pub engine: Engine,
    /// PostgreSQL connection string (for `--engine pgvector`).
    #[arg(long, env = "NEST_PG_DSN")]
    pub dsn: Option<String>,
    /// The pgvector table (for `--engine pgvector`).
    #[arg(long, default_value = "nest_vectors")]
    pub table: String,
}

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// Copy an index into PostgreSQL + pgvector: `halfvec` full vectors with expression indexes
    /// on `subvector(...)` and `binary_quantize(...)::bit(n)`.
    Pgvector(ExportPgvectorArgs),
    /// Write a training checkpoint's model as a model folder (what `final/` would hold had the
    /// run ended at that step), for a run that was cut or has not finished.
    Checkpoint(ExportCheckpointArgs),
}

#[derive(Debug, Args)]
pub struct ExportCheckpointArgs {
    /// The checkpoint (`RUN/checkpoints/step-N`), or a run folder (its newest checkpoint).
    #[arg(value_name = "CHECKPOINT")]
    pub checkpoint: PathBuf,
    /// The model folder to write (new, or empty; `--overwrite` replaces a model there).
    #[arg(long)]
    pub out: PathBuf,
    /// Replace the model an `--out` folder holds (never a folder without a model).
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(Debug, Args)]
pub struct ExportPgvectorArgs {
    #[arg(long)]
    pub index: PathBuf,
    #[arg(long, env = "NEST_PG_DSN")]
    pub dsn: String,
    #[arg(long, default_value = "nest_vectors")]
    pub table: String,
    /// First-stage levels to build HNSW indexes for, e.g. `binary:384,float32:64` (default:
    /// every binary level and every float32 level below the full dim).
    #[arg(long)]
    pub hnsw: Option<String>,
    /// Replace the table if it exists.
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The model (a folder or a hub id). Repeat to serve several from one process, each as
    /// `[NAME=]PATH[#ADAPTOR]` (NAME: its served name; ADAPTOR: a `nest compress` adaptor),
    /// e.g. `--model base=models/m --model small=models/m#adaptors/smec`; a request's `model`
    /// picks one, the first when it names none.
    #[arg(long, default_value = crate::args_model::DEFAULT_MODEL)]
    pub model: Vec<String>,
    /// The arithmetic: auto (bf16 where it measured faster on this machine, else float32),
    /// float32, bf16 or int8; what ran is in /v1/models and /metrics.
    #[arg(long, default_value = "auto", env = "NEST_DTYPE")]
    pub dtype: nest_model::DtypeChoice,
    /// Apply this adaptor (from `nest compress`) to every vector (of the first model).
    #[arg(long)]
    pub adaptor: Option<PathBuf>,
    /// Serve `POST /v1/search` and `POST /v1/documents` over this index (`nest index build`
    /// with the same model): queries are embedded at the index's layer.
    #[arg(long)]
    pub index: Option<PathBuf>,
    /// The name clients pass as `model` for the first model (default: the model folder's
    /// name, or for a training run's `final/` the run's name).
    #[arg(long)]
    pub served_name: Option<String>,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Serve any (dims, layers) point, not only those the model was trained for.
    #[arg(long)]
    pub allow_any_point: bool,
    /// Ignore request fields an endpoint does not read (as text-embeddings-inference and vLLM
    /// do), for clients written for servers that read more. Default: refuse them with a 400
    /// naming the field and the nearest one Nest reads, as OpenAI's API does (a misspelt
    /// `"layer": 3` would otherwise serve the full depth without a word).
    #[arg(long)]
    pub ignore_unknown_fields: bool,
    /// Most inputs in one request (413 above).
    #[arg(long, default_value_t = 32)]
    pub max_client_batch_size: usize,
    /// Most tokens in one forward batch; also the most one request may hold (413 above).
    #[arg(long, default_value_t = 16384)]
    pub max_batch_tokens: usize,
    /// Most inputs in one forward batch (text-embeddings-inference's --max-batch-requests).
    #[arg(long, default_value_t = 128)]
    pub max_batch_inputs: usize,
    /// Most inputs waiting; requests beyond it get 429.
    #[arg(long, default_value_t = 1024)]
    pub max_queued_inputs: usize,
    /// Worker threads running forward passes, each with its own copy of the model and an
    /// equal share of the libtorch threads (`--threads`). One gives a lone request the lowest
    /// latency; one per thread the highest throughput under load (BENCHMARKS.md). On a GPU
    /// each worker queues on a stream of its own (docs/SERVING.md).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Threads answering HTTP (reading requests, tokenising, writing vectors). Default: 2 on
    /// the CPU, whose cores the forward passes need; on a GPU the cores left after one per
    /// worker (from 2 to 16), where 2 would cap the inputs a second below what the device
    /// encodes.
    #[arg(long)]
    pub http_threads: Option<usize>,
    /// Truncate inputs to this many tokens (default: the model's max_seq_length).
    #[arg(long)]
    pub max_length: Option<usize>,
    /// Largest request body in bytes (413 above).
    #[arg(long, default_value_t = 2 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Accept only requests with `Authorization: Bearer <key>` (repeat, or comma-separate in
    /// NEST_API_KEY); /health stays open. Default: no keys, open to anyone who can connect.
    #[arg(
        long = "api-key",
        env = "NEST_API_KEY",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub api_keys: Vec<String>,
    /// More keys, one per line (`#` comments); errors name FILE:LINE.
    #[arg(long)]
    pub api_key_file: Option<PathBuf>,
    /// Leave /metrics open when keys are set (for a scraper on a private network).
    #[arg(long)]
    pub open_metrics: bool,
    /// Seconds a request may take, reading its body included (408 after; a client has at
    /// most 10 s of it to send the request head).
    #[arg(long, default_value_t = 60)]
    pub request_timeout: u64,
    /// Allow browsers on this origin to call the API (CORS; repeatable, `*` for any).
    /// Default: no CORS headers.
    #[arg(long = "cors-allow-origin")]
    pub cors_allow_origin: Vec<String>,
    /// glibc: allocations of at least this many MiB get their own mappings, returned to the
    /// system when freed (1: resident memory stays flat under a long mixed load, at a cost in
    /// throughput: docs/RELIABILITY.md); 0: glibc's adaptive default. MALLOC_MMAP_THRESHOLD_
    /// in the environment wins.
    #[arg(long, default_value_t = 0)]
    pub mmap_threshold_mib: usize,
    /// Give freed memory back to the kernel (glibc `malloc_trim`) at most this often, per
    /// worker, between batches, so resident memory stays flat under a long mixed load; 0: never.
    #[arg(long, default_value_t = 1000)]
    pub trim_interval_ms: u64,
}

#[derive(Debug, Args)]
pub struct BenchServeArgs {
    /// The server to load (Nest's or a peer's OpenAI-compatible `/v1/embeddings`).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    #[arg(long, default_value_t = 60.0)]
    pub seconds: f64,
    /// Texts to send (one per line, or `.jsonl` with `text`), cycled through.
    #[arg(long)]
    pub texts: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub inputs_per_request: usize,
    /// `dimensions` sent in each request (was `--dimensions`, a hidden alias for one release).
    #[arg(long = "dim", alias = "dimensions")]
    pub dimensions: Option<usize>,
    /// `layers` sent in each request: the exit layer (was `--layers`, a hidden alias for one
    /// release; elsewhere `--layers` names a list of exits).
    #[arg(long = "layer", alias = "layers")]
    pub layers: Option<usize>,
    /// `model` sent in each request.
    #[arg(long)]
    pub model: Option<String>,
    /// The route loaded: `/v1/embeddings`, or Nest's `/v1/search` (texts go in `query`).
    #[arg(long, default_value = "/v1/embeddings")]
    pub path: String,
    /// More body fields, `KEY=JSON` (repeatable), e.g. `--field encoding_format=int8`,
    /// `--field 'funnel="binary:384@100>float32:384"'`, `--field k=10`; a value that is not
    /// JSON is sent as a string.
    #[arg(long)]
    pub field: Vec<String>,
    /// The server's process id, to report its resident memory before and after.
    #[arg(long)]
    pub pid: Option<u32>,
    /// A label for the printed JSON line.
    #[arg(long, default_value = "nest")]
    pub label: String,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 120.0)]
    pub timeout: f64,
}

#[derive(Debug, Args)]
pub struct BenchSoakArgs {
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    #[arg(long, default_value_t = 600.0)]
    pub seconds: f64,
    /// Seconds between samples of p99 latency and memory.
    #[arg(long, default_value_t = 10.0)]
    pub sample_every: f64,
    /// Texts to send (one per line, or `.jsonl` with `text`), cycled through.
    #[arg(long)]
    pub texts: PathBuf,
    /// The server's API key (then requests without it are in the mix, expecting 401).
    #[arg(long, env = "NEST_API_KEY", hide_env_values = true)]
    pub key: Option<String>,
    /// The server's --max-client-batch-size (oversized requests send one input more).
    #[arg(long, default_value_t = 32)]
    pub max_client_batch_size: usize,
    /// Concurrent full-size requests in the closing burst (0: none).
    #[arg(long, default_value_t = 256)]
    pub burst: usize,
    /// The server's process id, for its resident memory.
    #[arg(long)]
    pub pid: Option<u32>,
}

#[derive(Debug, Args)]
pub struct BenchSearchArgs {
    #[arg(long)]
    pub index: PathBuf,
    /// Query texts (embedded with the index's model), one per line or `.jsonl`.
    #[arg(long)]
    pub queries: Vec<PathBuf>,
    /// Funnels to measure, separated by `;` (exact full-dim search is always measured).
    #[arg(long, default_value = "binary:384>float32:384")]
    pub funnels: String,
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Use at most this many queries.
    #[arg(long, default_value_t = 1000)]
    pub max_queries: usize,
    /// Also build (once) an index of this many vectors drawn from a Gaussian with the index's
    /// mean and covariance, at the same levels, into `--synthetic-out`, and measure there.
    #[arg(long)]
    pub synthetic: Option<usize>,
    #[arg(long)]
    pub synthetic_out: Option<PathBuf>,
    /// Also run the same funnels through pgvector (table from `nest export pgvector`).
    #[arg(long, env = "NEST_PG_DSN")]
    pub dsn: Option<String>,
    #[arg(long, default_value = "nest_vectors")]
    pub table: String,
    /// Time the SIMD kernels against the plain loops over the index's levels.
    #[arg(long)]
    pub kernels: bool,
    /// Also time in-process search at batch 1, each query embedded alone then searched (what
    /// `POST /v1/search` does, without HTTP): QPS and p50 / p99 per funnel.
    #[arg(long)]
    pub end_to_end: bool,
    /// With `--end-to-end`: then send each query, right after its in-process run, to this
    /// server's `POST /v1/search` too (`nest serve --index` over the same index), so that both
    /// are timed query by query under the same conditions: HTTP / in-process QPS per funnel,
    /// and how many queries got the same hits both ways.
    #[arg(long, requires = "end_to_end")]
    pub paired_url: Option<String>,
    /// The CPU the `--paired-url` client thread is moved to (`taskset -p`); default: it runs
    /// where the process may.
    #[arg(long, requires = "paired_url")]
    pub client_cpu: Option<usize>,
}
