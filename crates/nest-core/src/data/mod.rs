//! Dataset readers for the layouts in `shared/datasets/README.md`.
//!
//! All TSV files there have one header row and **no quoting**: a `"` is literal text. The same
//! layouts are read from a `.csv` file as CSV (commas, `"` quoting), what pandas and HF
//! datasets export. Every reader checks the header and the column count of each row and reports
//! the 1-based line number of the first bad row.

mod beir;
mod documents;
mod labelled;
mod positives;
mod recorded;
mod sentences;
mod sts;
mod tsv;

pub use beir::Beir;
pub use documents::{
    content_sha256, id_problem, read_documents, read_documents_share, recorded_document_prompt,
    text_problem, texts_sha256, Document, DocumentShare, DOCUMENT_PROMPT, STORE_TEXT,
};
pub use labelled::{read_classification, read_pairs, LabelledPair, LabelledText};
pub use positives::read_positive_pairs;
pub use recorded::{
    point_differences, point_record, same_model, weights_note, weights_sha256, POINT_KEYS,
    WEIGHTS_KEY,
};
pub use sentences::{read_sentences, read_sentences_share};
pub use sts::{read_sts, StsPair};
pub use tsv::{is_csv, TsvTable};
