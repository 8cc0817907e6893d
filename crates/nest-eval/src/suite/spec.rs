//! What a grid run is asked for ([`GridSpec`]) and the progress events it reports.

use nest_model::prompt::TaskPrompts;

use crate::metrics::classify::LogRegConfig;
use crate::quantize::Precision;

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct GridSpec {
    pub layers: Vec<usize>,
    pub dims: Vec<usize>,
    pub precisions: Vec<Precision>,
    /// Binary retrieval: re-rank the top `10 * rescore` Hamming candidates by float query x ±1
    /// document (sentence-transformers' `rescore_multiplier`); 0 turns rescoring off.
    pub rescore: usize,
    pub logreg: LogRegConfig,
    /// An adaptor applied to every pooled vector (`nest eval --adaptor`); `dims` must be dims
    /// it serves.
    pub adaptor: Option<std::rc::Rc<nest_model::Adaptor>>,
    /// Keep per-item scores in the report for significance tests (`nest eval --no-items`
    /// leaves them out).
    pub items: bool,
    /// The prompt of each side (texts of symmetric tasks, retrieval queries, documents).
    pub prompts: TaskPrompts,
}

/// Progress events.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// `done` of `total` distinct texts embedded.
    Embed { done: usize, total: usize },
    /// `done` of `total` cells of `task` scored.
    Cells {
        task: &'a str,
        done: usize,
        total: usize,
    },
}
