//! ModernBERT parity with transformers and sentence-transformers (issue 22).
//!
//! Reference: `tests/reference/make_modernbert.py` (transformers 5.5, sentence-transformers 6.2,
//! torch 2.13, CPU) created a 4-layer ModernBERT at random (`ModernBertModel(config)` after
//! `torch.manual_seed(0)`, LayerNorm weights perturbed; a local window of 8 tokens so that the
//! sliding layers differ from the global ones on these sentences) in
//! `tests/fixtures/modernbert-tiny/model/` and wrote its outputs for the 30 parity sentences to
//! `reference.safetensors`. Tolerance: cosine >= 0.99999 per sentence at every exit (mean of
//! the final norm of each layer's states) and for the final embedding; token counts equal.

use nest_model::Architecture;

mod common;
use common::{check_every_exit, load_error_with_config};

#[test]
fn modernbert_matches_transformers_at_every_exit() {
    check_every_exit("modernbert", Architecture::ModernBert, 4);
}

#[test]
fn modernbert_config_errors_name_the_key() {
    let d = tempfile::tempdir().unwrap();
    let e = load_error_with_config(
        "modernbert",
        d.path(),
        r#""local_attention": 8"#,
        r#""local_attention": "wide""#,
    );
    assert!(e.contains("config.json") && e.contains("wide"), "{e}");
}
