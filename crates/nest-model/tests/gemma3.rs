//! Gemma 3 parity with transformers and sentence-transformers (issue 22).
//!
//! Reference: `tests/reference/make_gemma3.py` (transformers 5.5, sentence-transformers 6.2,
//! torch 2.13, CPU) created a 4-layer bidirectional Gemma 3 text model at random
//! (`Gemma3TextModel(config)` after `torch.manual_seed(0)`, matrices at N(0, 1/fan_in), norm
//! weights perturbed; sliding / full / sliding / full layers with a window narrower than the
//! sentences) in
//! `tests/fixtures/gemma3-tiny/model/` and wrote its outputs for the 30 parity sentences to
//! `reference.safetensors`. Tolerance: cosine >= 0.99999 per sentence at every exit (mean of
//! the final norm of each layer's states) and for the final embedding; token counts equal.

use nest_model::Architecture;

mod common;
use common::{check_every_exit, load_error_with_config};

#[test]
fn gemma3_matches_transformers_at_every_exit() {
    check_every_exit("gemma3", Architecture::Gemma3, 4);
}

#[test]
fn gemma3_config_errors_name_the_key() {
    let d = tempfile::tempdir().unwrap();
    let e = load_error_with_config(
        "gemma3",
        d.path(),
        r#""query_pre_attn_scalar": 24"#,
        r#""query_pre_attn_scalar": "wide""#,
    );
    assert!(e.contains("config.json") && e.contains("wide"), "{e}");
}
