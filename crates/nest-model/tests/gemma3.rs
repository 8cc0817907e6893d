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

/// EmbeddingGemma's pipeline (issue 22): mean pooling, then two Dense modules (32 -> 128 -> 32
/// here; 768 -> 3072 -> 768 in EmbeddingGemma-300m), Normalize, and its named prompts.
/// Reference: `tests/reference/make_embeddinggemma.py` (sentence-transformers 6.2) on the tiny
/// Gemma 3 above; tolerance: cosine >= 0.99999 per sentence for the full embedding, the
/// Matryoshka cut to 16 dims (cut after the whole pipeline) and with the `query` prompt.
#[test]
fn embeddinggemma_dense_pipeline_matches_sentence_transformers() {
    use nest_core::ElasticSpec;
    use nest_model::{ElasticEncoder, EncodeOptions};
    use tch::{Device, Tensor};
    let dir = common::root().join("tests/fixtures/embeddinggemma-tiny");
    let enc = ElasticEncoder::load(&dir.join("model"), Device::Cpu, None).unwrap();
    assert_eq!(enc.architecture(), Architecture::Gemma3);
    assert_eq!(enc.head.describe(), "32 -> 128 -> 32");
    assert_eq!(enc.output_dim(), 32);
    let fx: std::collections::HashMap<String, Tensor> =
        Tensor::read_safetensors(dir.join("reference.safetensors"))
            .unwrap()
            .into_iter()
            .collect();
    let texts = common::sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let opts = EncodeOptions::batch(8);
    let at = |dim: usize| {
        let m = enc
            .embed(&refs, ElasticSpec { layer: 4, dim }, opts, &mut |_| {})
            .unwrap();
        Tensor::from_slice(&m.data).view([m.rows as i64, m.dim as i64])
    };
    for (dim, key) in [(32, "embeddings"), (16, "embeddings_16")] {
        let w = common::worst(&at(dim), &fx[key]);
        eprintln!("embeddinggemma d{dim}: min cosine vs sentence-transformers {w:.8}");
        assert!(w >= 0.99999, "d{dim}: {w}");
    }
    let prompt = enc.prompts.get("query").unwrap().to_string();
    let with = enc
        .embed_prompted(&refs, &[4], opts, Some(&prompt), &mut |_| {})
        .unwrap()
        .remove(0);
    let w = common::worst(&with, &fx["embeddings_query"]);
    eprintln!("embeddinggemma with the query prompt: min cosine {w:.8}");
    assert!(w >= 0.99999, "{w}");
    assert!(
        common::worst(&with, &fx["embeddings"]) < 0.999,
        "the prompt matters"
    );
}
