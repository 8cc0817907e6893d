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
