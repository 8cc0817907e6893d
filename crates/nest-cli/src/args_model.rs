//! The model flags every model-loading command shares (`nest encode`, `eval`, `inspect`,
//! `index build`, `bench encode`, ...): a leaf module, so that the other argument modules import
//! it without importing each other.

use clap::Args;

/// The `--model` of every command that takes one: the checkout's `scripts/setup.sh` puts it
/// there, relative to the current folder.
pub const DEFAULT_MODEL: &str = "./models/all-MiniLM-L6-v2";

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// A local model directory (Hugging Face / sentence-transformers layout) or a hub id
    /// `org/name` (downloaded when the machine has internet).
    #[arg(long, default_value = crate::args_model::DEFAULT_MODEL)]
    pub model: String,
    /// Truncate inputs to this many tokens (default: the model's max_seq_length).
    #[arg(long)]
    pub max_length: Option<usize>,
    /// Sentences per forward pass.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Batches encoded at once, each on its share of the libtorch threads. Default: one per
    /// thread on CPU, the highest throughput on many texts (1.04-1.06x one stream of all the
    /// threads in bf16 on 2 cores; BENCHMARKS.md), and one on a GPU; 1 gives a single batch
    /// the lowest latency.
    #[arg(long)]
    pub streams: Option<usize>,
    /// With more than 0, a batch also holds at most this many padded tokens (rows x its longest
    /// text): long texts in small batches, short ones in large ones (at most --batch-size).
    #[arg(long, default_value_t = 0)]
    pub max_tokens_per_batch: usize,
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

/// Which prompt to prepend (sentence-transformers' `prompt_name` / `prompt`): default, the
/// model's `default_prompt_name` if it has one.
#[derive(Debug, Args, Clone, Default)]
pub struct PromptArgs {
    /// A prompt the model names in config_sentence_transformers.json (e.g. `query`). Default:
    /// the model's `default_prompt_name`; `nest index build` first takes its `document`
    /// (`passage`, `corpus`) prompt and `nest search` its `query` prompt, as
    /// sentence-transformers' `encode_document` / `encode_query`.
    #[arg(long, conflicts_with = "prompt")]
    pub prompt_name: Option<String>,
    /// A prompt's text, prepended to every input (e.g. `"query: "`; `""`: none).
    #[arg(long)]
    pub prompt: Option<String>,
}

impl PromptArgs {
    /// The prompt text for `model` (`None`: none), or an error naming `--prompt-name` and the
    /// prompts the model has.
    pub fn resolve<'m>(
        &'m self,
        model: &'m nest_model::ElasticEncoder,
    ) -> Result<Option<&'m str>, nest_core::Error> {
        let choice = nest_model::prompt::PromptChoice {
            name: self.prompt_name.as_deref(),
            text: self.prompt.as_deref(),
        };
        model.prompts.resolve(choice, "--prompt-name")
    }

    /// The prompt of texts on `side` of a search (`nest index build`: documents, `nest search`:
    /// queries): the asked one, else the model's prompt for that side, else its default.
    pub fn resolve_side<'m>(
        &'m self,
        model: &'m nest_model::ElasticEncoder,
        side: nest_model::prompt::Side,
    ) -> Result<Option<&'m str>, nest_core::Error> {
        let choice = nest_model::prompt::PromptChoice {
            name: self.prompt_name.as_deref(),
            text: self.prompt.as_deref(),
        };
        model.prompts.for_side(choice, "--prompt-name", side)
    }
}

/// The prompt of each side of `nest eval`'s tasks, chosen as sentence-transformers' `encode`,
/// `encode_query` and `encode_document` choose theirs.
#[derive(Debug, Args, Clone, Default)]
pub struct EvalPromptArgs {
    /// A prompt the model names, for every text (default: the model's `default_prompt_name`);
    /// retrieval queries and documents take it unless they have their own.
    #[arg(long, conflicts_with = "prompt")]
    pub prompt_name: Option<String>,
    /// A prompt's text for every text (see `--prompt-name`).
    #[arg(long)]
    pub prompt: Option<String>,
    /// Retrieval queries: a prompt the model names (default: its `query` prompt if it has one,
    /// else the texts' prompt).
    #[arg(long, conflicts_with = "query_prompt")]
    pub query_prompt_name: Option<String>,
    /// Retrieval queries: a prompt's text.
    #[arg(long)]
    pub query_prompt: Option<String>,
    /// Retrieval documents: a prompt the model names (default: its `document`, `passage` or
    /// `corpus` prompt if it has one, else the texts' prompt).
    #[arg(long, conflicts_with = "document_prompt")]
    pub document_prompt_name: Option<String>,
    /// Retrieval documents: a prompt's text.
    #[arg(long)]
    pub document_prompt: Option<String>,
}

impl EvalPromptArgs {
    /// Each side's prompt for `model`, or an error naming the flag and the model's prompts.
    pub fn resolve(
        &self,
        model: &nest_model::ElasticEncoder,
    ) -> Result<nest_model::prompt::TaskPrompts, nest_core::Error> {
        use nest_model::prompt::{PromptChoice, TaskPromptChoice};
        fn choice<'a>(name: &'a Option<String>, text: &'a Option<String>) -> PromptChoice<'a> {
            PromptChoice {
                name: name.as_deref(),
                text: text.as_deref(),
            }
        }
        model.prompts.for_tasks(TaskPromptChoice {
            text: choice(&self.prompt_name, &self.prompt),
            query: choice(&self.query_prompt_name, &self.query_prompt),
            document: choice(&self.document_prompt_name, &self.document_prompt),
            keys: [
                "--prompt-name",
                "--query-prompt-name",
                "--document-prompt-name",
            ],
        })
    }
}

impl ModelArgs {
    /// The batching of the bulk-encoding commands: `--batch-size`, and `--streams` (default: one
    /// per libtorch thread on CPU; one on a GPU, where the threads only queue kernels).
    pub fn encode_options(&self) -> anyhow::Result<nest_model::EncodeOptions> {
        anyhow::ensure!(
            self.batch_size >= 1,
            "--batch-size must be at least 1, got {}",
            self.batch_size
        );
        let threads = tch::get_num_threads().max(1) as usize;
        let default = match nest_model::default_device() {
            tch::Device::Cpu => threads,
            _ => 1,
        };
        let streams = self.streams.unwrap_or(default);
        anyhow::ensure!(
            (1..=threads).contains(&streams),
            "--streams must be between 1 and the libtorch threads ({threads}; --threads sets them), got {streams}"
        );
        Ok(nest_model::EncodeOptions {
            batch_size: self.batch_size,
            streams,
            max_tokens: self.max_tokens_per_batch,
            ..Default::default()
        })
    }
}
