//! Nest's benchmark clients, kept out of the libraries they measure: [`load`], the load
//! generator of `nest bench serve` (any OpenAI-compatible server, and Nest's `/v1/search`);
//! [`soak`], the mixed long run of `nest bench soak`.

pub mod load;
pub mod soak;

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
}

impl Error {
    pub(crate) fn bad(_param: Option<&'static str>, message: impl Into<String>) -> Self {
        Error::Config(message.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
