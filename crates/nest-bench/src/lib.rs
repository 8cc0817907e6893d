//! Nest's benchmark clients, kept out of the libraries they measure: [`load`], the load
//! generator of `nest bench serve` (any OpenAI-compatible server, and Nest's `/v1/search`);
//! [`soak`], the mixed long run of `nest bench soak`; [`paired`], the HTTP layer's cost
//! against in-process search, query by query (`nest bench search --paired-url`); [`train`], the training step and epoch
//! benchmark of `nest bench train`.

pub mod load;
pub mod paired;
pub mod soak;
pub mod train;

/// Errors of the benchmark clients.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting that cannot run (no texts, no clients, ...).
    #[error("{0}")]
    Config(String),
    /// A failed HTTP call.
    #[error("http: {0}")]
    Http(String),
    /// A client task that stopped.
    #[error("{0}")]
    Internal(String),
    /// A file or process of a benchmark: what was being done, and why it failed.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A peer benchmark (the Python side) that failed, or printed what cannot be read.
    #[error("{0}")]
    Peer(String),
    #[error(transparent)]
    Core(#[from] nest_core::Error),
    #[error(transparent)]
    Model(#[from] nest_model::Error),
    /// A recipe, training step or run of `nest bench train`.
    #[error(transparent)]
    Train(#[from] nest_train::Error),
}

impl Error {
    pub(crate) fn io(what: String, source: std::io::Error) -> Self {
        Error::Io { what, source }
    }

    pub(crate) fn bad(_param: Option<&'static str>, message: impl Into<String>) -> Self {
        Error::Config(message.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
