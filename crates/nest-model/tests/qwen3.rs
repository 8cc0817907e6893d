//! Qwen3 (the Qwen3-Embedding architecture) parity with transformers and sentence-transformers
//! (issue 22).
//!
//! Reference: `tests/reference/make_qwen3.py` (transformers 5.5, sentence-transformers 6.2, torch
//! 2.13, CPU) created a 4-layer Qwen3 at random (`Qwen3Model(config)` after
//! `torch.manual_seed(0)`, RMSNorm weights perturbed; grouped-query attention 4/2 heads of width
//! 16; a byte-level BPE tokenizer that appends `<|endoftext|>`, padding on the left) in
//! `tests/fixtures/qwen3-tiny/model/` and wrote its outputs for the 30 parity sentences to
//! `reference.safetensors`. Nest pads on the right: the match shows that the padding side does not
//! change the vectors. Tolerance: cosine >= 0.99999 per sentence at every exit (the final
//! RMSNorm of each layer's last real token) and for the final embedding, with and without the
//! `query` prompt; token counts equal.

use std::collections::HashMap;

use nest_model::{Architecture, ElasticEncoder, EncodeOptions};
use tch::{Device, Tensor};

mod common;
use common::{root, sentences, worst};

#[test]
fn qwen3_matches_transformers_at_every_exit_and_with_a_prompt() {
    let dir = root().join("tests/fixtures/qwen3-tiny");
    let enc = ElasticEncoder::load(&dir.join("model"), Device::Cpu, None).unwrap();
    assert_eq!(enc.architecture(), Architecture::Qwen3);
    assert_eq!(enc.pooling, nest_model::Pooling::LastToken);
    let fx: HashMap<String, Tensor> = Tensor::read_safetensors(dir.join("reference.safetensors"))
        .unwrap()
        .into_iter()
        .collect();
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids = enc.tokenizer.encode(&refs).unwrap();
    let lens: Vec<i64> = ids.iter().map(|v| v.len() as i64).collect();
    assert_eq!(lens, Vec::<i64>::try_from(&fx["token_lengths"]).unwrap());
    let eos = ids[0].last().copied();
    assert!(ids.iter().all(|v| v.last().copied() == eos), "EOS appended");
    let opts = EncodeOptions::batch(8);
    let layers = [1, 2, 3, 4];
    let pooled = enc.embed_layers(&refs, &layers, opts, &mut |_| {}).unwrap();
    for (k, l) in layers.iter().enumerate() {
        let w = worst(&pooled[k], &fx[&format!("layer_{l}")]);
        eprintln!("qwen3 exit {l}: min cosine vs transformers {w:.8}");
        assert!(w >= 0.99999, "exit {l}: {w}");
    }
    let w = worst(&pooled[3], &fx["embeddings"]);
    eprintln!("qwen3: min cosine vs sentence-transformers {w:.8}");
    assert!(w >= 0.99999);
    let prompt = enc.prompts.get("query").unwrap().to_string();
    let with = enc
        .embed_prompted(&refs, &[4], opts, Some(&prompt), &mut |_| {})
        .unwrap()
        .remove(0);
    let w = worst(&with, &fx["prompt_query"]);
    eprintln!("qwen3 with the query prompt: min cosine {w:.8}");
    assert!(w >= 0.99999);
    assert!(
        worst(&with, &fx["embeddings"]) < 0.999,
        "the prompt matters"
    );
}

#[test]
fn qwen3_in_bf16_and_int8_stays_close_to_float32() {
    let dir = root().join("tests/fixtures/qwen3-tiny/model");
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let opts = EncodeOptions::batch(8);
    let run = |dtype| {
        let mut enc = ElasticEncoder::load(&dir, Device::Cpu, None).unwrap();
        enc.convert_for_inference(dtype).unwrap();
        enc.embed_layers(&refs, &[2, 4], opts, &mut |_| {}).unwrap()
    };
    let f32_ = run(nest_model::Dtype::Float32);
    for (dtype, floor) in [
        (nest_model::Dtype::Bf16, 0.99),
        (nest_model::Dtype::Int8, 0.95),
    ] {
        let got = run(dtype);
        for k in 0..2 {
            let w = worst(&got[k], &f32_[k]);
            eprintln!(
                "qwen3 {dtype} exit {}: min cosine vs float32 {w:.5}",
                [2, 4][k]
            );
            assert!(w >= floor, "{dtype}: {w}");
        }
    }
}
