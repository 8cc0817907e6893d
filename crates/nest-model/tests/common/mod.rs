//! What the real-model tests share: the repository root, the models (skipped with a reason
//! when missing, except under CI), the parity sentences and fixtures.

#![allow(dead_code)] // each test file uses its own subset

use std::path::{Path, PathBuf};

use tch::Tensor;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `models/<name>`, or `None` (printed) when it is missing; a missing model fails under
/// `NEST_REQUIRE_MODELS=1` or `CI=true`.
pub fn model_dir(name: &str) -> Option<PathBuf> {
    let p = root().join("models").join(name);
    if p.join("model.safetensors").is_file() {
        return Some(p);
    }
    let required = std::env::var("NEST_REQUIRE_MODELS").is_ok_and(|v| v == "1")
        || std::env::var("CI").is_ok_and(|v| v == "true");
    if required {
        panic!(
            "{} is missing and CI=true or NEST_REQUIRE_MODELS=1: run scripts/setup.sh models",
            p.display()
        );
    }
    eprintln!(
        "SKIP {name}: {} not found (run scripts/setup.sh models)",
        p.display()
    );
    None
}

pub fn sentences() -> Vec<String> {
    let p = root().join("tests/fixtures/parity/sentences.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

pub fn fixture(name: &str) -> std::collections::HashMap<String, Tensor> {
    let p = root().join(format!("tests/fixtures/parity/{name}.safetensors"));
    Tensor::read_safetensors(p).unwrap().into_iter().collect()
}

/// Per-row cosine similarity.
pub fn row_cos(a: &Tensor, b: &Tensor) -> Vec<f64> {
    use nest_model::pooling::l2_normalize;
    let c = (l2_normalize(a) * l2_normalize(b)).sum_dim_intlist(1, false, tch::Kind::Double);
    Vec::<f64>::try_from(&c).unwrap()
}

/// The smallest per-row cosine.
pub fn worst(a: &Tensor, b: &Tensor) -> f64 {
    row_cos(a, b).into_iter().fold(1.0, f64::min)
}

/// `tests/fixtures/<arch>-tiny/model`: a tiny model made by transformers (tests/reference/).
pub fn tiny_model(arch: &str) -> PathBuf {
    root().join(format!("tests/fixtures/{arch}-tiny/model"))
}

/// The reference outputs of `tests/fixtures/<arch>-tiny`.
pub fn tiny_reference(arch: &str) -> std::collections::HashMap<String, Tensor> {
    let p = root().join(format!("tests/fixtures/{arch}-tiny/reference.safetensors"));
    Tensor::read_safetensors(p).unwrap().into_iter().collect()
}

/// Loads the tiny `arch` model, checks its architecture and its token counts against the
/// reference, and that every exit in `1..=layers` and the final embedding (at the last layer)
/// match transformers / sentence-transformers to cosine >= 0.99999; returns the encoder, the
/// reference and the pooled states.
pub fn check_every_exit(
    arch: &str,
    expected: nest_model::Architecture,
    layers: usize,
) -> (
    nest_model::ElasticEncoder,
    std::collections::HashMap<String, Tensor>,
    Vec<Tensor>,
) {
    let enc = nest_model::ElasticEncoder::load(&tiny_model(arch), tch::Device::Cpu, None).unwrap();
    assert_eq!(enc.architecture(), expected);
    let fx = tiny_reference(arch);
    let texts = sentences();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ids = enc.tokenizer.encode(&refs).unwrap();
    let lens: Vec<i64> = ids.iter().map(|v| v.len() as i64).collect();
    assert_eq!(lens, Vec::<i64>::try_from(&fx["token_lengths"]).unwrap());
    let exits: Vec<usize> = (1..=layers).collect();
    let opts = nest_model::EncodeOptions::batch(8);
    let pooled = enc.embed_layers(&refs, &exits, opts, &mut |_| {}).unwrap();
    for (k, l) in exits.iter().enumerate() {
        let w = worst(&pooled[k], &fx[&format!("layer_{l}")]);
        eprintln!("{arch} exit {l}: min cosine vs transformers {w:.8}");
        assert!(w >= 0.99999, "{arch} exit {l}: {w}");
    }
    let w = worst(&pooled[layers - 1], &fx["embeddings"]);
    eprintln!("{arch}: min cosine vs sentence-transformers {w:.8}");
    assert!(w >= 0.99999, "{arch}: {w}");
    (enc, fx, pooled)
}

/// A copy of the tiny `arch` model in `dir` with `config.json`'s `from` replaced by `to`; the
/// load error.
pub fn load_error_with_config(arch: &str, dir: &Path, from: &str, to: &str) -> String {
    let src = tiny_model(arch);
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        if f.file_type().unwrap().is_file() {
            std::fs::copy(f.path(), dir.join(f.file_name())).unwrap();
        }
    }
    let cfg = std::fs::read_to_string(src.join("config.json")).unwrap();
    assert!(cfg.contains(from), "{from} is not in {arch}'s config.json");
    std::fs::write(dir.join("config.json"), cfg.replace(from, to)).unwrap();
    nest_model::ElasticEncoder::load(dir, tch::Device::Cpu, None)
        .unwrap_err()
        .to_string()
}
