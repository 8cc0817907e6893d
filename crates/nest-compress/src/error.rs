use std::path::PathBuf;

/// Errors of `nest-compress`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Core(#[from] nest_core::Error),
    #[error(transparent)]
    Model(#[from] nest_model::Error),
    #[error(transparent)]
    Eval(#[from] nest_eval::Error),
    /// An input file disagrees with another or with what was asked (ids, counts, dims).
    #[error("{path}: {message}")]
    Input { path: PathBuf, message: String },
    /// A bad option value.
    #[error("{key}: {message}")]
    Option { key: String, message: String },
    /// The loss became NaN or infinite; nothing was written.
    #[error("non-finite {what} at stage {stage}, epoch {epoch}: training stopped before the update, nothing written")]
    NonFinite {
        what: &'static str,
        stage: usize,
        epoch: usize,
    },
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}

impl Error {
    pub fn input(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Input {
            path: path.into(),
            message: message.into(),
        }
    }
    pub fn option(key: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Option {
            key: key.into(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
