//! Metrics, each checked against an independent computation in the tests
//! (`tests/reference/*.py`: SciPy, scikit-learn, pytrec_eval, MTEB's threshold search).

pub mod classify;
pub mod pair;
pub mod rank;
pub mod retrieval;

pub use rank::{average_ranks, pearson, spearman};
