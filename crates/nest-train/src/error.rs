use std::path::PathBuf;

/// Errors of `nest-train`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Core(#[from] nest_core::Error),
    #[error(transparent)]
    Model(#[from] nest_model::Error),
    #[error(transparent)]
    Eval(#[from] nest_eval::Error),
    /// Mining (`nest_index::mine`): its output, options or state.
    #[error(transparent)]
    Index(#[from] nest_index::Error),
    /// A recipe key or flag is unknown or has a bad value.
    #[error("recipe {source_name}: {message}")]
    Recipe {
        source_name: String,
        message: String,
    },
    /// The run directory holds another run, or a resume does not match the checkpoint.
    #[error("{path}: {message}")]
    Run { path: PathBuf, message: String },
    /// The loss or the gradient became NaN or infinite: stopped before the update, the last
    /// good checkpoint untouched.
    #[error("non-finite {what} {value} at step {step}: training stopped before the update; the last good checkpoint is {last_checkpoint}")]
    NonFinite {
        what: &'static str,
        step: u64,
        value: f64,
        last_checkpoint: String,
    },
    /// A step failed inside libtorch (out of memory on the GPU or the host, a kernel's error):
    /// the run stopped there, nothing of that step written, the last checkpoint intact.
    #[error("step {step} failed: {cause}{advice}. The last checkpoint is {last_checkpoint}")]
    StepFailed {
        step: u64,
        cause: String,
        advice: String,
        last_checkpoint: String,
    },
    /// libtorch failed outside a step (resuming, evaluating, writing the final model): the
    /// run stopped, its checkpoints intact.
    #[error("training stopped: {0}")]
    Stopped(String),
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// A data-parallel launch, rendezvous or collective failed.
    #[error(transparent)]
    Dist(#[from] nest_dist::DistError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
