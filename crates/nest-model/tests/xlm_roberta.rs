//! XLM-RoBERTa parity with transformers and sentence-transformers (issue 22).
//!
//! Reference: `tests/reference/make_xlmr.py` (transformers 5.5, sentence-transformers 6.2, torch
//! 2.13, CPU) created a 4-layer XLM-RoBERTa at random (`XLMRobertaModel(config)` after
//! `torch.manual_seed(0)`; a SentencePiece-Unigram tokenizer trained by `tokenizers`) in
//! `tests/fixtures/xlmr-tiny/model/` and wrote its outputs for the 30 parity sentences to
//! `reference.safetensors`. Tolerance: cosine >= 0.99999 per sentence at every layer (mean-pooled
//! hidden states) and for the final embedding; token counts equal. The same for a prompt
//! (`encode(prompt="query: ")`, with the prompt's tokens in and out of the pooling) and for
//! last-token pooling.

use nest_model::{Architecture, ElasticEncoder, EncodeOptions};
use tch::{Device, Tensor};

mod common;
use common::{root, row_cos, sentences, tiny_reference, worst};

#[test]
fn xlm_roberta_matches_transformers_at_every_layer() {
    let dir = root().join("tests/fixtures/xlmr-tiny");
    let enc = ElasticEncoder::load(&dir.join("model"), Device::Cpu, None).unwrap();
    assert_eq!(enc.architecture(), Architecture::XlmRoberta);
    let fx: std::collections::HashMap<String, Tensor> =
        Tensor::read_safetensors(dir.join("reference.safetensors"))
            .unwrap()
            .into_iter()
            .collect();
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids = enc.tokenizer.encode(&refs).unwrap();
    let lens: Vec<i64> = ids.iter().map(|v| v.len() as i64).collect();
    assert_eq!(lens, Vec::<i64>::try_from(&fx["token_lengths"]).unwrap());
    let layers = [1, 2, 3, 4];
    let pooled = enc
        .embed_layers(&refs, &layers, EncodeOptions::batch(8), &mut |_| {})
        .unwrap();
    for (k, l) in layers.iter().enumerate() {
        let cos = row_cos(&pooled[k], &fx[&format!("layer_{l}")]);
        let worst = cos.iter().copied().fold(1.0, f64::min);
        eprintln!("xlm-roberta layer {l}: min cosine vs transformers {worst:.8}");
        assert!(worst >= 0.99999, "layer {l}: cosines {cos:?}");
    }
    let cos = row_cos(&pooled[3], &fx["embeddings"]);
    let worst = cos.iter().copied().fold(1.0, f64::min);
    eprintln!("xlm-roberta: min cosine vs sentence-transformers {worst:.8}");
    assert!(worst >= 0.99999, "cosines {cos:?}");
}

#[test]
fn prompts_and_last_token_pooling_match_sentence_transformers() {
    let dir = root().join("tests/fixtures/xlmr-tiny/model");
    let mut enc = ElasticEncoder::load(&dir, Device::Cpu, None).unwrap();
    let fx = tiny_reference("xlmr");
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let opts = EncodeOptions::batch(8);
    let run = |enc: &ElasticEncoder, prompt| {
        enc.embed_prompted(&refs, &[4], opts, prompt, &mut |_| {})
            .unwrap()
            .remove(0)
    };
    let with = run(&enc, Some("query: "));
    let w = worst(&with, &fx["prompt_query"]);
    eprintln!("prompt, included: min cosine {w:.8}");
    assert!(w >= 0.99999);
    // the prompt changes the vectors (the check above is not vacuous)
    assert!(worst(&with, &fx["embeddings"]) < 0.999);
    enc.include_prompt = false;
    let without = run(&enc, Some("query: "));
    let w = worst(&without, &fx["prompt_query_excluded"]);
    eprintln!("prompt, excluded from pooling: min cosine {w:.8}");
    assert!(w >= 0.99999);
    assert!(worst(&without, &with) < 0.9999);
    enc.include_prompt = true;
    enc.pooling = nest_model::Pooling::LastToken;
    let last = run(&enc, None);
    let w = worst(&last, &fx["lasttoken"]);
    let diff = (&last - &fx["lasttoken"]).abs().max().double_value(&[]);
    eprintln!("last-token pooling: min cosine {w:.8}, max |diff| {diff:.2e}");
    assert!(w >= 0.99999 && diff < 1e-4);
}

#[test]
fn unsupported_model_type_names_the_supported_ones() {
    let d = tempfile::tempdir().unwrap();
    let src = root().join("tests/fixtures/xlmr-tiny/model");
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        if f.file_type().unwrap().is_file() {
            std::fs::copy(f.path(), d.path().join(f.file_name())).unwrap();
        }
    }
    let cfg = std::fs::read_to_string(d.path().join("config.json")).unwrap();
    std::fs::write(
        d.path().join("config.json"),
        cfg.replace("\"xlm-roberta\"", "\"gpt2\""),
    )
    .unwrap();
    let e = ElasticEncoder::load(d.path(), Device::Cpu, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gpt2") && e.contains("xlm-roberta") && e.contains("config.json"),
        "{e}"
    );
}
