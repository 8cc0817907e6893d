use std::path::PathBuf;

/// Errors of `nest-core`. Every variant names the file (and line) or the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A data file has a row that does not fit its layout.
    #[error("{path}, line {line}: {message}")]
    Row {
        path: PathBuf,
        line: u64,
        message: String,
    },
    /// A file is well-formed but its content is not what was expected (e.g. empty, wrong header).
    #[error("{path}: {message}")]
    Content { path: PathBuf, message: String },
    /// A user-given value (a flag or a key) is out of range or malformed.
    #[error("{key}: {message}")]
    Value { key: String, message: String },
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
    pub fn content(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Content {
            path: path.into(),
            message: message.into(),
        }
    }
    pub fn value(key: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Value {
            key: key.into(),
            message: message.into(),
        }
    }

    /// The same error under another key (a parser shared by a flag and a recipe key reports
    /// the one the user wrote); other kinds are returned unchanged.
    pub fn with_key(self, key: &str) -> Self {
        match self {
            Error::Value { message, .. } => Error::value(key, message),
            other => other,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
