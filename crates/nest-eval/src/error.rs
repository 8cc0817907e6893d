/// Errors of `nest-eval`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Core(#[from] nest_core::Error),
    #[error(transparent)]
    Model(#[from] nest_model::Error),
    #[error("plot {path}: {message}")]
    Plot {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("report: {0}")]
    Report(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A maker of plotting errors about the figure at `path`.
    pub fn plot(path: &std::path::Path) -> impl Fn(String) -> Error + '_ {
        move |message| Error::Plot {
            path: path.to_path_buf(),
            message,
        }
    }
}
