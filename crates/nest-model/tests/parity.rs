//! Parity with sentence-transformers and transformers on the real models.
//!
//! Reference: `tests/reference/make_parity.py` (sentence-transformers 5 / transformers, torch
//! 2.13, CPU) wrote `tests/fixtures/parity/*.safetensors` for the 30 sentences in
//! `sentences.json`. Tolerance: cosine >= 0.99999 per sentence, for the final embedding and for
//! the mean-pooled hidden states at layers 1, 3 and the last.
//!
//! Needs `models/` (scripts/setup.sh models). Without it the test prints why and passes, unless
//! `NEST_REQUIRE_MODELS=1` or `CI=true` (as in CI), where a missing model fails.

use nest_model::pooling::l2_normalize;
use nest_model::{ElasticEncoder, EncodeOptions};
use tch::{Device, Kind};

mod common;
use common::{fixture, model_dir, row_cos, sentences};

fn check(name: &str, layers: [usize; 3]) {
    let Some(dir) = model_dir(name) else { return };
    let enc = ElasticEncoder::load(&dir, Device::Cpu, None).unwrap();
    let fx = fixture(name);
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    let ids = enc.tokenizer.encode(&refs).unwrap();
    let lens: Vec<i64> = ids.iter().map(|v| v.len() as i64).collect();
    let want: Vec<i64> = Vec::try_from(&fx["token_lengths"]).unwrap();
    assert_eq!(
        lens, want,
        "{name}: token counts differ from sentence-transformers'"
    );

    let pooled = enc
        .embed_layers(&refs, &layers, EncodeOptions::batch(8), &mut |_| {})
        .unwrap();
    for (k, l) in layers.iter().enumerate() {
        let cos = row_cos(&pooled[k], &fx[&format!("layer_{l}")]);
        let worst = cos.iter().copied().fold(1.0, f64::min);
        eprintln!("{name} layer {l}: min cosine vs transformers {worst:.8}");
        assert!(worst >= 0.99999, "{name} layer {l}: cosines {cos:?}");
    }
    let last = layers[2];
    let full = l2_normalize(&pooled[2]);
    let cos = row_cos(&full, &fx["embeddings"]);
    let worst = cos.iter().copied().fold(1.0, f64::min);
    let maxdiff = (&full - &fx["embeddings"]).abs().max().double_value(&[]);
    eprintln!("{name} layer {last}: min cosine vs sentence-transformers {worst:.8}, max |diff| {maxdiff:.2e}");
    assert!(worst >= 0.99999, "{name}: cosines {cos:?}");
}

#[test]
fn minilm_matches_sentence_transformers() {
    check("all-MiniLM-L6-v2", [1, 3, 6]);
}

#[test]
fn mpnet_matches_sentence_transformers() {
    check("all-mpnet-base-v2", [1, 3, 12]);
}

#[test]
fn real_batching_and_truncation() {
    let Some(dir) = model_dir("all-MiniLM-L6-v2") else {
        return;
    };
    let enc = ElasticEncoder::load(&dir, Device::Cpu, None).unwrap();
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let spec = nest_core::ElasticSpec { layer: 3, dim: 64 };
    let batch = enc
        .embed(&refs, spec, EncodeOptions::batch(16), &mut |_| {})
        .unwrap();
    let full = enc
        .embed(
            &refs,
            nest_core::ElasticSpec { layer: 3, dim: 384 },
            EncodeOptions::default(),
            &mut |_| {},
        )
        .unwrap();
    for (i, t) in refs.iter().enumerate() {
        let one = enc
            .embed(&[t], spec, EncodeOptions::batch(1), &mut |_| {})
            .unwrap();
        let d = one
            .row(0)
            .iter()
            .zip(batch.row(i))
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(d < 1e-5, "text {i}: batch vs single max diff {d}");
        let prefix = &full.row(i)[..64];
        let n = prefix.iter().map(|v| v * v).sum::<f32>().sqrt();
        let d = prefix
            .iter()
            .zip(batch.row(i))
            .map(|(a, b)| (a / n - b).abs())
            .fold(0f32, f32::max);
        assert!(
            d < 1e-5,
            "text {i}: truncated vs normalised prefix max diff {d}"
        );
    }
}

/// [CLS]-row attention probabilities against transformers' `output_attentions` (eager
/// attention, eval mode) on a padded batch. Fixture: `tests/reference/make_attention.py`.
/// Tolerance: 1e-5 absolute per probability; padded keys must get exactly 0.
#[test]
fn cls_attention_matches_transformers() {
    let name = "all-MiniLM-L6-v2";
    let Some(dir) = model_dir(name) else { return };
    let enc = ElasticEncoder::load(&dir, Device::Cpu, None).unwrap();
    let fx = fixture(&format!("attention-{name}"));
    let input = nest_model::EncoderInput {
        ids: fx["ids"].shallow_clone(),
        mask: fx["mask"].shallow_clone(),
    };
    let _g = tch::no_grad_guard();
    let per_head = enc.forward_with(&input, 6, false, nest_model::ClsAttention::PerHead);
    let mean = enc.forward_with(&input, 6, false, nest_model::ClsAttention::Mean);
    let plain = enc.forward(&input, 6, false);
    assert!(plain.cls_attention.is_empty());
    assert_eq!(per_head.cls_attention.len(), 6);
    let pad = fx["mask"].eq(0).unsqueeze(1);
    for l in 1..=6 {
        let want = &fx[&format!("layer_{l}")];
        let got = &per_head.cls_attention[l - 1];
        assert_eq!(got.size(), want.size(), "layer {l}");
        let diff = (got - want).abs().max().double_value(&[]);
        eprintln!("{name} layer {l}: max |attention - transformers| {diff:.2e}");
        assert!(diff < 1e-5, "layer {l}: {diff}");
        let at_pad = got
            .masked_select(&pad.expand_as(got))
            .abs()
            .sum(Kind::Double);
        assert_eq!(at_pad.double_value(&[]), 0.0, "layer {l}: padding attended");
        let m = (&mean.cls_attention[l - 1] - want.mean_dim(1, false, Kind::Float))
            .abs()
            .max()
            .double_value(&[]);
        assert!(m < 1e-5, "layer {l} (mean over heads): {m}");
        // the fused path's hidden states are unchanged by the capture
        let same = (&per_head.hidden_states[l] - &plain.hidden_states[l])
            .abs()
            .max()
            .double_value(&[]);
        assert!(
            same < 1e-6,
            "layer {l}: hidden states changed by the capture"
        );
    }
}
