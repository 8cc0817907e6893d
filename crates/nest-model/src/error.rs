use std::path::PathBuf;

/// Errors of `nest-model`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Core(#[from] nest_core::Error),
    /// The model directory or one of its files is missing.
    #[error("{path}: {message}")]
    Missing { path: PathBuf, message: String },
    /// A config file could not be parsed or has an unsupported or inconsistent value.
    #[error("{path}: {message}")]
    Config { path: PathBuf, message: String },
    /// The weights file does not fit the config (missing tensor, wrong shape).
    #[error("{path}: {message}")]
    Weights { path: PathBuf, message: String },
    /// The tokenizer could not be loaded or failed on an input.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A hub download failed.
    #[error("hub: {0}")]
    Hub(String),
    /// An error from libtorch.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
