//! The Dense head (IBKD section 3.4's projection) against sentence-transformers.
//!
//! Reference: `tests/reference/make_dense.py` (sentence-transformers 6.2, torch 2.13, CPU) saved
//! all-MiniLM-L6-v2 + `Dense(384 -> 128, no bias, Identity)` + `Normalize` with
//! sentence-transformers' own `save`; `tests/fixtures/parity/dense/` keeps its `modules.json`,
//! `2_Dense/` and the vectors `encode` gave (at 128, and with `truncate_dim=64`). Tolerance:
//! cosine >= 0.99999 per sentence. Needs `models/` (see parity.rs for the skip rule).

use std::path::{Path, PathBuf};

use nest_core::ElasticSpec;
use nest_model::{ElasticEncoder, EncodeOptions};
use tch::{Device, Kind, Tensor};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// all-MiniLM-L6-v2's files plus the fixture's `modules.json` and `2_Dense/`, in a temp dir.
fn model_with_dense() -> Option<tempfile::TempDir> {
    let base = root().join("models/all-MiniLM-L6-v2");
    if !base.join("model.safetensors").is_file() {
        let required = std::env::var("NEST_REQUIRE_MODELS").is_ok_and(|v| v == "1")
            || std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !required,
            "{} is missing: run scripts/setup.sh models",
            base.display()
        );
        eprintln!(
            "SKIP dense parity: {} not found (run scripts/setup.sh models)",
            base.display()
        );
        return None;
    }
    let d = tempfile::tempdir().unwrap();
    for f in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ] {
        let src = base.join(f);
        if src.is_file() {
            std::fs::create_dir_all(d.path().join(f).parent().unwrap()).unwrap();
            std::fs::copy(&src, d.path().join(f)).unwrap();
        }
    }
    let fx = root().join("tests/fixtures/parity/dense");
    std::fs::create_dir_all(d.path().join("2_Dense")).unwrap();
    for f in [
        "modules.json",
        "2_Dense/config.json",
        "2_Dense/model.safetensors",
    ] {
        std::fs::copy(fx.join(f), d.path().join(f)).unwrap();
    }
    Some(d)
}

fn row_cos_min(a: &Tensor, b: &Tensor) -> f64 {
    let a = nest_model::pooling::l2_normalize(a);
    let b = nest_model::pooling::l2_normalize(b);
    (a * b)
        .sum_dim_intlist(1, false, Kind::Double)
        .min()
        .double_value(&[])
}

#[test]
fn a_sentence_transformers_dense_head_gives_its_vectors() {
    let Some(dir) = model_with_dense() else {
        return;
    };
    let enc = ElasticEncoder::load(dir.path(), Device::Cpu, None).unwrap();
    assert_eq!((enc.hidden_size(), enc.output_dim()), (384, 128));
    assert!(enc.normalize);
    let texts: Vec<String> = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/parity/sentences.json")).unwrap(),
    )
    .unwrap();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let fx: std::collections::HashMap<String, Tensor> =
        Tensor::read_safetensors(root().join("tests/fixtures/parity/dense/vectors.safetensors"))
            .unwrap()
            .into_iter()
            .collect();
    for (dim, key) in [(128, "embeddings"), (64, "embeddings_64")] {
        let m = enc
            .embed(
                &refs,
                ElasticSpec { layer: 6, dim },
                EncodeOptions::batch(8),
                &mut |_| {},
            )
            .unwrap();
        let ours = Tensor::from_slice(&m.data).view([m.rows as i64, dim as i64]);
        let worst = row_cos_min(&ours, &fx[key]);
        eprintln!("dense head at {dim}: min cosine vs sentence-transformers {worst:.8}");
        assert!(worst >= 0.99999, "{key}: min cosine {worst}");
    }
    // dims past the head's output are refused
    assert!(enc.check(&[6], &[256]).is_err());
}

#[test]
fn a_bad_dense_config_is_named() {
    let Some(dir) = model_with_dense() else {
        return;
    };
    let cfg = dir.path().join("2_Dense/config.json");
    let good = std::fs::read_to_string(&cfg).unwrap();
    let cases = [
        (
            good.replace(
                "torch.nn.modules.linear.Identity",
                "torch.nn.modules.activation.ReLU",
            ),
            "activation_function",
        ),
        (good.replace("384", "512"), "in_features 512"),
        (
            good.replace("\"out_features\": 128", "\"out_features\": 64"),
            "linear.weight",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(&cfg, text).unwrap();
        let e = ElasticEncoder::load(dir.path(), Device::Cpu, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2_Dense") && e.contains(want), "{e}");
    }
}
