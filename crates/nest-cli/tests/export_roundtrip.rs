//! Nest's export read back by sentence-transformers, checked in CI without sentence-transformers
//! (issue 22): `tests/reference/export_roundtrip.py` exported each tiny backbone with
//! `nest slim --keep-layers 2`, had sentence-transformers load and encode the folder, and wrote
//! the sha256 of every exported file and sentence-transformers' vectors to
//! `tests/fixtures/export-roundtrip.json`. Here the same export runs again: its files must be
//! byte for byte the ones sentence-transformers read (a changed exporter must rerun the script),
//! and Nest's vectors of the exported model must match sentence-transformers' (cosine >= 0.99999,
//! the parity tolerance).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn nest(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_nest"))
        .env("NEST_DTYPE", "float32")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nest {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Relative path -> sha256 of every file under `dir`.
fn files_of(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                let sum = Sha256::digest(std::fs::read(&p).unwrap());
                out.insert(rel, format!("{sum:x}"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (n(a) * n(b))
}

#[test]
fn sentence_transformers_reads_what_nest_exports() {
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/export-roundtrip.json")).unwrap(),
    )
    .unwrap();
    let sentences: Vec<&str> = fixture["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.txt");
    std::fs::write(&input, sentences.join("\n") + "\n").unwrap();
    let s = |p: &Path| p.display().to_string();
    let models = fixture["models"].as_object().unwrap();
    assert_eq!(models.len(), 5);
    for (arch, want) in models {
        let src = root().join(format!("tests/fixtures/{arch}-tiny/model"));
        let out = d.path().join(arch);
        nest(&[
            "slim",
            "--model",
            &s(&src),
            "--keep-layers",
            "2",
            "--out",
            &s(&out),
        ]);
        let files: BTreeMap<String, String> =
            serde_json::from_value(want["files"].clone()).unwrap();
        assert_eq!(
            files_of(&out),
            files,
            "{arch}: the exported files differ from those sentence-transformers read; \
             rerun tests/reference/export_roundtrip.py"
        );
        let vectors = d.path().join(format!("{arch}.jsonl"));
        nest(&[
            "encode",
            "--model",
            &s(&out),
            "--input",
            &s(&input),
            "--output",
            &s(&vectors),
        ]);
        let ours: Vec<Vec<f64>> = std::fs::read_to_string(&vectors)
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                serde_json::from_value(v["embedding"].clone()).unwrap()
            })
            .collect();
        let theirs: Vec<Vec<f64>> = serde_json::from_value(want["embeddings"].clone()).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{arch}");
        let mut worst = 1.0f64;
        for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a.len(), b.len(), "{arch}: sentence {k}: dims");
            let c = cosine(a, b);
            assert!(c >= 0.99999, "{arch}: sentence {k}: cosine {c}");
            worst = worst.min(c);
        }
        eprintln!(
            "{arch}: {} files as read by sentence-transformers, min cosine {worst:.8}",
            files.len()
        );
    }
}

/// The metadata other tools read (`tests/reference/export_metadata.py`): sentence-transformers
/// found `truncate_dim` 128 and encoded 128 dims, and vLLM's expressions over transformers'
/// `AutoConfig` found `is_matryoshka` and the trained dims, in the config files this export
/// writes again byte for byte.
#[test]
fn vllm_and_sentence_transformers_read_the_elastic_metadata() {
    let fx: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/export-metadata.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(fx["sentence_transformers"]["truncate_dim"], 128);
    assert_eq!(
        fx["sentence_transformers"]["encode_shape"],
        serde_json::json!([1, 128])
    );
    assert_eq!(fx["vllm"]["is_matryoshka"], true);
    assert_eq!(
        fx["vllm"]["matryoshka_dimensions"],
        serde_json::json!([64, 128, 256, 384])
    );
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let model = root().join("models/all-MiniLM-L6-v2");
    for e in std::fs::read_dir(&model).unwrap() {
        let p = e.unwrap().path();
        let to = src.join(p.file_name().unwrap());
        if p.is_dir() {
            std::fs::create_dir_all(&to).unwrap();
            for f in std::fs::read_dir(&p).unwrap() {
                let f = f.unwrap().path();
                std::fs::copy(&f, to.join(f.file_name().unwrap())).unwrap();
            }
        } else {
            std::fs::copy(&p, &to).unwrap();
        }
    }
    std::fs::write(src.join("nest.json"), fx["nest_json"].to_string()).unwrap();
    let out = d.path().join("slim");
    let mut args = vec![
        "slim".to_string(),
        "--model".into(),
        src.display().to_string(),
    ];
    args.extend(
        fx["slim"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string()),
    );
    args.extend(["--out".into(), out.display().to_string()]);
    nest(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let files = files_of(&out);
    for (f, sum) in fx["sha256"].as_object().unwrap() {
        assert_eq!(
            files[f.as_str()],
            sum.as_str().unwrap(),
            "{f} differs from what the tools read"
        );
    }
}
