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

use std::collections::HashMap;

use nest_model::pooling::l2_normalize;
use nest_model::{Architecture, ElasticEncoder, EncodeOptions};
use tch::{Device, Kind, Tensor};

mod common;
use common::{root, sentences};

fn worst(a: &Tensor, b: &Tensor) -> f64 {
    let c = (l2_normalize(a) * l2_normalize(b)).sum_dim_intlist(1, false, Kind::Double);
    Vec::<f64>::try_from(&c)
        .unwrap()
        .into_iter()
        .fold(1.0, f64::min)
}

#[test]
fn gemma3_matches_transformers_at_every_exit() {
    let dir = root().join("tests/fixtures/gemma3-tiny");
    let enc = ElasticEncoder::load(&dir.join("model"), Device::Cpu, None).unwrap();
    assert_eq!(enc.architecture(), Architecture::Gemma3);
    let fx: HashMap<String, Tensor> = Tensor::read_safetensors(dir.join("reference.safetensors"))
        .unwrap()
        .into_iter()
        .collect();
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids = enc.tokenizer.encode(&refs).unwrap();
    let lens: Vec<i64> = ids.iter().map(|v| v.len() as i64).collect();
    assert_eq!(lens, Vec::<i64>::try_from(&fx["token_lengths"]).unwrap());
    let layers = [1, 2, 3, 4];
    let opts = EncodeOptions { batch_size: 8 };
    let pooled = enc.embed_layers(&refs, &layers, opts, &mut |_| {}).unwrap();
    for (k, l) in layers.iter().enumerate() {
        let w = worst(&pooled[k], &fx[&format!("layer_{l}")]);
        eprintln!("gemma3 exit {l}: min cosine vs transformers {w:.8}");
        assert!(w >= 0.99999, "exit {l}: {w}");
    }
    let w = worst(&pooled[3], &fx["embeddings"]);
    eprintln!("gemma3: min cosine vs sentence-transformers {w:.8}");
    assert!(w >= 0.99999);
}

#[test]
fn gemma3_config_errors_name_the_key() {
    let d = tempfile::tempdir().unwrap();
    let src = root().join("tests/fixtures/gemma3-tiny/model");
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        if f.file_type().unwrap().is_file() {
            std::fs::copy(f.path(), d.path().join(f.file_name())).unwrap();
        }
    }
    let cfg = std::fs::read_to_string(src.join("config.json")).unwrap();
    std::fs::write(
        d.path().join("config.json"),
        cfg.replace(
            "\"query_pre_attn_scalar\": 24",
            "\"query_pre_attn_scalar\": \"wide\"",
        ),
    )
    .unwrap();
    let e = ElasticEncoder::load(d.path(), Device::Cpu, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("config.json") && e.contains("wide"), "{e}");
}
