//! The bodies of Nest's fuzz targets and their seed inputs, in one file shared by two users:
//! the libFuzzer targets of this crate (`fuzz_targets/*.rs`, run by `scripts/setup/fuzz.sh`) and the
//! workspace test that replays every target's corpus in CI
//! (`crates/nest-cli/tests/fuzz_corpus.rs`, which includes this file by path).
//!
//! The property of every target: any bytes give `Ok` or an error that names the file it read
//! (and the line or key where the parser knows it); never a panic, an abort or a hang.

use std::path::{Path, PathBuf};

/// A target's body: one input, checked against the property (a panic is a finding).
pub type Body = fn(&[u8]);

/// Every target: its name (the `fuzz_targets/<name>.rs` binary) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("tsv", tsv),
    ("jsonl", jsonl),
    ("beir", beir),
    ("recipe", recipe),
    ("model_config", model_config),
    ("matrix", matrix),
    ("adaptor", adaptor),
    ("checkpoint", checkpoint),
    ("teacher_cache", teacher_cache),
    ("index", index),
    ("model_folder", model_folder),
    ("http_body", http_body),
];

/// The repository's root: where the template model of [`model_folder`] is read from. The
/// fuzz binaries run from the root (`scripts/setup/fuzz.sh`); the replay test sets it.
static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Sets the repository root (once; later calls are ignored).
pub fn set_root(root: &Path) {
    let _ = ROOT.set(root.to_path_buf());
}

fn root() -> PathBuf {
    ROOT.get().cloned().unwrap_or_else(|| PathBuf::from("."))
}

/// Separates the files of a multi-file input (a BEIR folder, an adaptor, a checkpoint).
pub const SEP: u8 = 0xFF;

/// A scratch folder of this process for target `name`.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nest-fuzz-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("a scratch folder");
    d
}

/// Removes this process's scratch folders: the corpus replay's end (a libFuzzer process keeps
/// its own for its whole run, and several run at once).
pub fn remove_scratch() {
    let suffix = format!("-{}", std::process::id());
    let dir = std::fs::read_dir(std::env::temp_dir());
    for e in dir.into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("nest-fuzz-") && name.ends_with(&suffix) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn write(p: &Path, bytes: &[u8]) {
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("a folder");
    }
    std::fs::write(p, bytes).expect("a scratch file");
}

/// An error must name one of `files` (its name is enough: some errors give the folder).
fn names<T, E: std::fmt::Display>(r: Result<T, E>, files: &[&str]) {
    if let Err(e) = r {
        let m = e.to_string();
        assert!(files.iter().any(|f| m.contains(f)), "no file named in: {m}");
    }
}

/// Splits a multi-file input into `n` parts at [`SEP`] (missing parts are empty).
fn parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut it = data.splitn(n, |&b| b == SEP);
    (0..n).map(|_| it.next().unwrap_or(&[])).collect()
}

/// The same bytes as an STS, triplets, labelled and pairs TSV.
pub fn tsv(data: &[u8]) {
    use nest_core::data::{read_classification, read_pairs, read_sts, TsvTable};
    let p = scratch("tsv").join("input.tsv");
    write(&p, data);
    names(read_sts(&p), &["input.tsv"]);
    names(
        TsvTable::read(&p, &["anchor", "positive", "negative"]),
        &["input.tsv"],
    );
    names(read_classification(&p), &["input.tsv"]);
    names(read_pairs(&p), &["input.tsv"]);
}

/// Documents and sentences, as `.jsonl` and as plain text.
pub fn jsonl(data: &[u8]) {
    let dir = scratch("jsonl");
    for name in ["input.jsonl", "input.txt"] {
        let p = dir.join(name);
        write(&p, data);
        names(nest_core::data::read_documents(&p), &[name]);
        names(nest_core::data::read_sentences(&p), &[name]);
    }
}

/// A BEIR folder: corpus, queries and qrels cut from one input at [`SEP`].
pub fn beir(data: &[u8]) {
    let dir = scratch("beir");
    let files = ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"];
    for (name, part) in files.iter().zip(parts(data, 3)) {
        write(&dir.join(name), part);
    }
    names(
        nest_core::data::Beir::read(&dir, "test"),
        &["corpus.jsonl", "queries.jsonl", "test.tsv"],
    );
}

/// The same bytes as a `nest train` recipe and a `nest distill` recipe (TOML).
pub fn recipe(data: &[u8]) {
    let p = scratch("recipe").join("recipe.toml");
    write(&p, data);
    names(
        nest_train::Recipe::load(Some(&p), &Default::default()),
        &["recipe.toml"],
    );
    names(
        nest_train::distill::DistillRecipe::load(&p, &Default::default()),
        &["recipe.toml"],
    );
}

/// `config.json` (and the architecture it names) and `config_sentence_transformers.json`.
pub fn model_config(data: &[u8]) {
    let dir = scratch("model-config");
    let p = dir.join("config.json");
    write(&p, data);
    match nest_model::config::ModelConfig::read(&p) {
        // a config that parses either names a supported architecture or says which it lacks
        Ok(c) => drop(c.architecture()),
        Err(e) => names::<(), _>(Err(e), &["config.json"]),
    }
    let st = dir.join("config_sentence_transformers.json");
    write(&st, data);
    names(
        nest_model::prompt::Prompts::read(Some(&st)),
        &["config_sentence_transformers.json"],
    );
}

/// The same bytes as `.npy` and `.safetensors` embedding matrices.
pub fn matrix(data: &[u8]) {
    let dir = scratch("matrix");
    for name in ["m.npy", "m.safetensors"] {
        let p = dir.join(name);
        write(&p, data);
        names(nest_compress::data::read_matrix(&p), &[name]);
    }
}

/// An adaptor folder: `adaptor.json` and `adaptor.safetensors` cut at [`SEP`]; an adaptor that
/// loads is applied at each of its dims.
pub fn adaptor(data: &[u8]) {
    let dir = scratch("adaptor").join("adaptor");
    let p = parts(data, 2);
    write(&dir.join("adaptor.json"), p[0]);
    write(&dir.join("adaptor.safetensors"), p[1]);
    match nest_model::Adaptor::load(&dir) {
        Ok(a) => {
            let x = tch::Tensor::ones(
                [2, a.meta.input_dim as i64],
                (tch::Kind::Float, tch::Device::Cpu),
            );
            for d in a.dims() {
                names(a.apply(&x, d), &["adaptor"]);
            }
        }
        Err(e) => names::<(), _>(Err(e), &["adaptor.json", "adaptor.safetensors"]),
    }
}

/// A run folder holding one checkpoint: `state.json` and `optimizer.safetensors` cut at [`SEP`];
/// listed as `--resume` lists it, then read.
pub fn checkpoint(data: &[u8]) {
    let run = scratch("checkpoint").join("run");
    let ck = run.join("checkpoints").join("step-00000003");
    let p = parts(data, 2);
    write(&ck.join("state.json"), p[0]);
    write(&ck.join("optimizer.safetensors"), p[1]);
    for (_, dir) in nest_train::checkpoint::list(&run) {
        names(nest_train::checkpoint::load(&dir), &["step-00000003"]);
    }
}

/// A teacher-cache file (`.ntc`): looked up for three texts, the misses "encoded" as rows of 4.
/// A damaged file is discarded with its reason; a file of another width is an error naming it.
pub fn teacher_cache(data: &[u8]) {
    let path = scratch("teacher-cache").join("t.ntc");
    write(&path, data);
    let cache = nest_train::distill::cache::TeacherCache::at(path);
    let texts: Vec<String> = ["a cat", "rain", "a cat"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut encode = |t: &[&str]| -> nest_train::Result<tch::Tensor> {
        Ok(tch::Tensor::ones(
            [t.len() as i64, 4],
            (tch::Kind::Float, tch::Device::Cpu),
        ))
    };
    names(
        cache.embed(&texts, 2, &mut encode, &mut |_, _| {}),
        &["t.ntc"],
    );
}

/// The files of a Nest index (`nest index build`): a valid 3-vector index with float32, int8 and
/// binary levels is built once; the input's first byte picks one of its files and the rest
/// replaces that file's bytes. An index that opens has every row of every level, every id and
/// every payload read.
pub fn index(data: &[u8]) {
    let template = index_template();
    let dir = scratch("index").join("idx");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    let files = index_files(&template);
    for f in &files {
        std::fs::copy(template.join(f), dir.join(f)).expect("a copy");
    }
    if let Some((&pick, rest)) = data.split_first() {
        write(&dir.join(&files[pick as usize % files.len()]), rest);
    }
    match nest_index::Index::open(&dir) {
        Ok(ix) => {
            for level in ix.levels() {
                names(ix.rows(level), &["idx"]);
            }
            for row in 0..ix.len() {
                let _ = (ix.id(row), ix.payload(row));
            }
        }
        Err(e) => names::<(), _>(Err(e), &["idx"]),
    }
}

/// The files of the index template, sorted (the manifest first: `index.json` sorts before
/// the data files only by luck, so it is put first explicitly).
fn index_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("the template")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n != "index.json")
        .collect();
    v.sort();
    v.insert(0, "index.json".into());
    v
}

/// Builds (once per process) the valid index that [`index`] damages.
fn index_template() -> PathBuf {
    static T: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        use nest_index::{IndexBuilder, Level, Precision};
        let out = scratch("index-template").join("idx");
        let _ = std::fs::remove_dir_all(&out);
        let levels = [
            Level {
                precision: Precision::Float32,
                dim: 8,
            },
            Level {
                precision: Precision::Int8,
                dim: 8,
            },
            Level {
                precision: Precision::Binary,
                dim: 8,
            },
        ];
        let mut b = IndexBuilder::create(&out, 8, &levels, true, serde_json::json!({}), false)
            .expect("the template index");
        for i in 0..3 {
            let v: Vec<f32> = (0..8).map(|j| ((i * 8 + j) as f32 * 0.37).sin()).collect();
            let payload = serde_json::json!({ "n": i });
            b.push(&format!("d{i}"), Some(&payload), &v).expect("a row");
        }
        b.finish().expect("the template index");
        out
    })
    .clone()
}

/// The files of a model folder, loaded as `nest encode --model` loads it: a copy of the
/// tiny EmbeddingGemma fixture (prompts, pooling without the prompt, two Dense modules, a
/// Normalize module) whose file picked by the input's first byte is replaced by the rest (or
/// created: `nest.json`). A model that loads embeds two texts at its last layer.
pub fn model_folder(data: &[u8]) {
    let template = root().join("tests/fixtures/embeddinggemma-tiny/model");
    let dir = scratch("model-folder").join("model");
    let _ = std::fs::remove_dir_all(&dir);
    for f in MODEL_FILES.iter().chain(
        [
            "model.safetensors",
            "2_Dense/model.safetensors",
            "3_Dense/model.safetensors",
        ]
        .iter(),
    ) {
        if template.join(f).exists() {
            write(
                &dir.join(f),
                &std::fs::read(template.join(f)).expect("the template model"),
            );
        }
    }
    if let Some((&pick, rest)) = data.split_first() {
        write(
            &dir.join(MODEL_FILES[pick as usize % MODEL_FILES.len()]),
            rest,
        );
    }
    match nest_model::ElasticEncoder::load(&dir, tch::Device::Cpu, None) {
        Ok(enc) => {
            let layers = [enc.num_layers()];
            let r = enc.embed_layers(&["a cat", ""], &layers, Default::default(), &mut |_| {});
            names(r, &["model"]);
        }
        Err(e) => names::<(), _>(Err(e), &["model"]),
    }
}

/// The files [`model_folder`] replaces (`nest.json` is not in the template: it is created).
const MODEL_FILES: &[&str] = &[
    "config.json",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
    "config_sentence_transformers.json",
    "tokenizer_config.json",
    "2_Dense/config.json",
    "4_Normalize/config.json",
    "nest.json",
    "tokenizer.json",
    // the weights, read tensor by tensor from their header (`nest_model::weights`)
    "model.safetensors",
    "2_Dense/model.safetensors",
];

/// An HTTP request body of `POST /v1/embeddings`: parsed, or a 4xx error.
pub fn http_body(data: &[u8]) {
    if let Err(e) = nest_serve::request::parse(data, Default::default()) {
        assert!(e.status().is_client_error(), "{e}: status {}", e.status());
    }
}

/// The seed inputs of `target`, made from the repository's recipes and fixtures and, where
/// `data` (the shared datasets folder) exists, from the first lines of its real files.
pub fn seeds(target: &str, root: &Path, data: &Path) -> Vec<Vec<u8>> {
    let read = |p: PathBuf| std::fs::read(p).ok();
    let head = |rel: &str, n: usize| -> Option<Vec<u8>> {
        let b = std::fs::read(data.join(rel)).ok()?;
        let cut = b
            .iter()
            .enumerate()
            .filter(|(_, &c)| c == b'\n')
            .nth(n)
            .map_or(b.len(), |(i, _)| i + 1);
        Some(b[..cut].to_vec())
    };
    let glob = |dir: &str, suffix: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        v.sort();
        v
    };
    let fixtures = |file: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = glob("tests/fixtures", "")
            .into_iter()
            .map(|d| d.join("model").join(file))
            .filter(|p| p.exists())
            .collect();
        v.sort();
        v
    };
    let join = |v: &[&[u8]]| v.join(&SEP);
    let mut out: Vec<Option<Vec<u8>>> = match target {
        "tsv" => vec![
            Some(b"sentence1\tsentence2\tscore\na cat\ta dog\t3.5\n".to_vec()),
            head("stsb/test.tsv", 20),
            head("snli/triplets_dev.tsv", 20),
            head("banking77/train.tsv", 20),
            head("mrpc/train.tsv", 20),
        ],
        "jsonl" => vec![
            Some(b"{\"_id\": \"d1\", \"title\": \"t\", \"text\": \"a cat\"}\n".to_vec()),
            head("scifact/corpus.jsonl", 3),
            head("scifact/queries.jsonl", 20),
        ],
        "beir" => vec![Some(join(&[
            b"{\"_id\": \"d1\", \"text\": \"a cat\"}\n",
            b"{\"_id\": \"q1\", \"text\": \"cats?\"}\n",
            b"query-id\tcorpus-id\tscore\nq1\td1\t1\n",
        ]))]
        .into_iter()
        .chain([(|| {
            Some(join(&[
                &head("scifact/corpus.jsonl", 3)?,
                &head("scifact/queries.jsonl", 10)?,
                &head("scifact/qrels/test.tsv", 10)?,
            ]))
        })()])
        .collect(),
        "recipe" => glob("recipes", ".toml").into_iter().map(read).collect(),
        "model_config" => fixtures("config.json")
            .into_iter()
            .chain(fixtures("config_sentence_transformers.json"))
            .map(read)
            .collect(),
        "matrix" => vec![Some(npy())]
            .into_iter()
            .chain([Some(safetensors("embeddings"))])
            .chain(
                fixtures("model.safetensors")
                    .into_iter()
                    .filter(|p| p.metadata().is_ok_and(|m| m.len() < 64 << 10))
                    .map(read),
            )
            .collect(),
        "adaptor" => vec![Some(join(&[
            br#"{"format":1,"method":"pca","input_dim":3,"normalize_input":true,"heads":[{"dims":[1,2]}]}"#,
            &safetensors_of(&[("weight.0", &[2, 3]), ("bias.0", &[2])]),
        ]))],
        "checkpoint" => vec![Some(join(&[
            br#"{"step":3,"epoch":0,"next_batch":3,"recipe_sha256":"x","model":"m","last_loss":1.0}"#,
            &safetensors("m.w"),
        ]))],
        "teacher_cache" => vec![Some(ntc(&[[7u8; 32], [9u8; 32]], 4))],
        "index" => {
            let t = index_template();
            index_files(&t)
                .iter()
                .enumerate()
                .map(|(k, f)| {
                    let mut b = vec![k as u8];
                    b.extend(std::fs::read(t.join(f)).ok()?);
                    Some(b)
                })
                .collect()
        }
        "model_folder" => {
            let t = root.join("tests/fixtures/embeddinggemma-tiny/model");
            let mut v: Vec<Option<Vec<u8>>> = MODEL_FILES
                .iter()
                .enumerate()
                .map(|(k, f)| {
                    let mut b = vec![k as u8];
                    b.extend(std::fs::read(t.join(f)).ok()?);
                    Some(b)
                })
                .collect();
            v.push(Some([&[8u8][..], br#"{"matryoshka_dims": [8, 16], "trained_layers": [1, 2], "default_dim": 16}"#].concat()));
            v
        }
        "http_body" => vec![
            Some(br#"{"input": "a cat", "model": "m"}"#.to_vec()),
            Some(br#"{"input": ["a", "b"], "model": "m", "dimensions": 64, "layers": 3, "encoding_format": "base64"}"#.to_vec()),
            Some(br#"{"input": [[101, 2023, 102]], "model": "m", "prompt_name": "query"}"#.to_vec()),
        ],
        _ => panic!("no target {target}"),
    };
    out.retain(Option::is_some);
    out.into_iter().flatten().collect()
}

/// A float32 `.npy` of shape (2, 3).
fn npy() -> Vec<u8> {
    let mut h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }".to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    for i in 0..6 {
        b.extend_from_slice(&(i as f32 / 7.0).to_le_bytes());
    }
    b
}

/// A safetensors file with one float32 tensor `name` of shape [2, 3].
fn safetensors(name: &str) -> Vec<u8> {
    safetensors_of(&[(name, &[2, 3])])
}

/// A safetensors file of float32 tensors (name, shape), their values counting up.
fn safetensors_of(tensors: &[(&str, &[usize])]) -> Vec<u8> {
    let (mut head, mut at) = (Vec::new(), 0);
    for (name, shape) in tensors {
        let n: usize = shape.iter().product();
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        head.push(format!(
            r#""{name}":{{"dtype":"F32","shape":[{}],"data_offsets":[{at},{}]}}"#,
            dims.join(","),
            at + 4 * n
        ));
        at += 4 * n;
    }
    let h = format!("{{{}}}", head.join(","));
    let mut b = (h.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(h.as_bytes());
    for i in 0..at / 4 {
        b.extend_from_slice(&(i as f32 / 5.0).to_le_bytes());
    }
    b
}

/// A valid teacher-cache file of `keys` (sorted) with rows of `dim` (layout in
/// `nest_train::distill::cache`).
fn ntc(keys: &[[u8; 32]], dim: usize) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut b = b"NESTTC01".to_vec();
    b.extend_from_slice(&(keys.len() as u64).to_le_bytes());
    b.extend_from_slice(&(dim as u64).to_le_bytes());
    for k in keys {
        b.extend_from_slice(k);
    }
    for i in 0..keys.len() * dim {
        b.extend_from_slice(&(i as f32).to_le_bytes());
    }
    let sum = Sha256::digest(&b);
    b.extend_from_slice(&sum);
    b
}
