use std::path::PathBuf;

/// Errors of `nest-index`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Core(#[from] nest_core::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An index file that is missing, truncated, corrupted or inconsistent with `index.json`.
    #[error("{path}: {message}")]
    Corrupt { path: PathBuf, message: String },
    /// A bad argument (funnel text, level, dim, k, vector length).
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
    /// A PostgreSQL / pgvector failure.
    #[error("pgvector: {0}")]
    Postgres(String),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    pub fn corrupt(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.into(),
            message: message.into(),
        }
    }
    pub fn invalid(key: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Invalid {
            key: key.into(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
