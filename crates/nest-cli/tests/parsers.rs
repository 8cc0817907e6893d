//! Every parser of user input against arbitrary bytes (issue 23): random bytes, and valid seed
//! files with random edits (bytes replaced, inserted, deleted, lines duplicated, truncation).
//! The property: `Ok`, or an error that names the file; never a panic, an abort or a hang.
//! Cases per parser: `PROPTEST_CASES` (default 128 here; docs/RELIABILITY.md has longer runs).

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

fn cases() -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// `seed` with `edits` applied: (kind, position, byte).
fn mutate(seed: &[u8], edits: &[(u8, usize, u8)]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for &(kind, pos, byte) in edits {
        let at = if b.is_empty() { 0 } else { pos % (b.len() + 1) };
        match kind {
            0 if at < b.len() => b[at] = byte,
            1 => b.insert(at, byte),
            2 if at < b.len() => {
                let end = (at + 1 + byte as usize % 16).min(b.len());
                b.drain(at..end);
            }
            3 => {
                // duplicate the line holding `at`
                let start = b[..at]
                    .iter()
                    .rposition(|&c| c == b'\n')
                    .map_or(0, |p| p + 1);
                let end = b[at..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| at + p + 1);
                let line = b[start..end].to_vec();
                b.splice(end..end, line);
            }
            4 => b.truncate(at),
            _ => {}
        }
    }
    b
}

fn input(seed: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        proptest::collection::vec((0u8..5, any::<usize>(), any::<u8>()), 1..6)
            .prop_map(move |e| mutate(&seed, &e)),
    ]
}

/// An error must name the file (its name is enough: some errors give the folder's path).
fn names<T, E: std::fmt::Display>(r: Result<T, E>, file: &str) -> Result<(), TestCaseError> {
    if let Err(e) = r {
        let m = e.to_string();
        prop_assert!(m.contains(file), "error without the file name {file}: {m}");
    }
    Ok(())
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, bytes).unwrap();
    p
}

const STS: &str = "sentence1\tsentence2\tscore\na cat\ta dog\t3.5\nrain\tsun\t0.0\n";
const TRIPLETS: &str = "anchor\tpositive\tnegative\na\tb\tc\nd\te\tf\n";
const LABELLED: &str = "text\tlabel\nhello\t1\nbye\t0\n";
const PAIRS: &str = "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\t0\n";
const JSONL: &str = "{\"_id\": \"d1\", \"title\": \"t\", \"text\": \"a cat\"}\n{\"_id\": \"d2\", \"text\": \"rain\"}\n";
const RECIPE: &str = "model = \"m\"\nloss = \"cosent\"\nmatryoshka_dims = [16, 32]\nlr = 2e-5\n[[data]]\npath = \"a.tsv\"\nformat = \"scored\"\n";

fn npy() -> Vec<u8> {
    npy_with_shape("(2, 3)")
}

/// A float32 `.npy` whose header says `shape`, holding 6 values.
fn npy_with_shape(shape: &str) -> Vec<u8> {
    let mut h = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    for x in [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0] {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

fn safetensors(name: &str) -> Vec<u8> {
    let h = format!(r#"{{"{name}":{{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}}}"#);
    let mut b = (h.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(h.as_bytes());
    for x in [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0] {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn tsv_readers(b in input(STS.into()), t in input(TRIPLETS.into()), l in input(LABELLED.into()), p in input(PAIRS.into())) {
        let d = tempfile::tempdir().unwrap();
        let f = write(d.path(), "sts.tsv", &b);
        names(nest_core::data::read_sts(&f), "sts.tsv")?;
        let f = write(d.path(), "triplets.tsv", &t);
        names(nest_core::data::TsvTable::read(&f, &["anchor", "positive", "negative"]), "triplets.tsv")?;
        let f = write(d.path(), "labelled.tsv", &l);
        names(nest_core::data::read_classification(&f), "labelled.tsv")?;
        let f = write(d.path(), "pairs.tsv", &p);
        names(nest_core::data::read_pairs(&f), "pairs.tsv")?;
        // the trainer's formats over the same bytes
        for (fmt, file) in [("scored", "sts.tsv"), ("triplets", "triplets.tsv"), ("pairs", "pairs.tsv"), ("single", "labelled.tsv"), ("nli", "pairs.tsv")] {
            let spec: nest_train::recipe::DataSource = toml::from_str(&format!(
                "path = {:?}\nformat = \"{fmt}\"", d.path().join(file).display().to_string()
            )).unwrap_or_else(|_| toml::from_str(&format!("path = {:?}\nformat = \"pairs\"", d.path().join(file).display().to_string())).unwrap());
            names(nest_train::data::read_source(&spec), file)?;
        }
    }

    #[test]
    fn jsonl_and_beir(c in input(JSONL.into()), q in input(b"{\"_id\": \"q1\", \"text\": \"cats?\"}\n".to_vec()), r in input(b"query-id\tcorpus-id\tscore\nq1\td1\t1\n".to_vec())) {
        let d = tempfile::tempdir().unwrap();
        let f = write(d.path(), "corpus.jsonl", &c);
        names(nest_core::data::read_documents(&f), "corpus.jsonl")?;
        names(nest_core::data::read_sentences(&f), "corpus.jsonl")?;
        write(d.path(), "queries.jsonl", &q);
        write(d.path(), "qrels/test.tsv", &r);
        if let Err(e) = nest_core::data::Beir::read(d.path(), "test") {
            let m = e.to_string();
            prop_assert!(["corpus.jsonl", "queries.jsonl", "test.tsv"].iter().any(|f| m.contains(f)), "{m}");
        }
    }

    #[test]
    fn recipes_and_overrides(r in input(RECIPE.into()), flags in proptest::collection::vec("[-a-z_.0-9=:,\\[\\] ]{0,12}", 0..4)) {
        let d = tempfile::tempdir().unwrap();
        let f = write(d.path(), "r.toml", &r);
        names(nest_train::Recipe::load(Some(&f), &Default::default()), "r.toml")?;
        let ok = write(d.path(), "ok.toml", RECIPE.as_bytes());
        // arbitrary keys and values, as the CLI's reader would hand them over
        let flags = nest_train::recipe::Overrides::from_text(
            flags.iter().map(|f| f.split_once(' ').unwrap_or((f.as_str(), ""))),
        );
        let _ = nest_train::Recipe::load(Some(&ok), &flags);
        let g = write(d.path(), "d.toml", &r);
        names(nest_train::distill::DistillRecipe::load(&g, &flags), "d.toml")?;
    }

    #[test]
    fn model_folder_files(cfg in input(br#"{"architectures":["BertModel"],"model_type":"bert","hidden_size":32,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":37,"vocab_size":99,"max_position_embeddings":64,"type_vocab_size":2,"hidden_act":"gelu","layer_norm_eps":1e-12}"#.to_vec()),
                          meta in input(br#"{"matryoshka_dims":[8,16],"trained_layers":[1,2]}"#.to_vec()),
                          pool in input(br#"{"word_embedding_dimension":32,"pooling_mode_mean_tokens":true}"#.to_vec()),
                          prompts in input(br#"{"prompts":{"query":"query: "},"default_prompt_name":null}"#.to_vec())) {
        let d = tempfile::tempdir().unwrap();
        let f = write(d.path(), "config.json", &cfg);
        names(nest_model::ModelConfig::read(&f), "config.json")?;
        let f = write(d.path(), "nest.json", &meta);
        names(nest_model::config::read_json::<nest_model::NestMeta>(&f), "nest.json")?;
        let f = write(d.path(), "1_Pooling/config.json", &pool);
        names(nest_model::config::read_json::<nest_model::config::PoolingConfig>(&f).and_then(|c| c.pooling(&f)), "config.json")?;
        let f = write(d.path(), "config_sentence_transformers.json", &prompts);
        names(nest_model::prompt::Prompts::read(Some(&f)), "config_sentence_transformers.json")?;
    }

    #[test]
    fn matrices_ids_and_adaptors(n in input(npy()), s in input(safetensors("embeddings")), ids in input(b"d1\nd2\n".to_vec()), aj in input(br#"{"method":"pca","dims":[3],"input_dim":3}"#.to_vec())) {
        let d = tempfile::tempdir().unwrap();
        let f = write(d.path(), "m.npy", &n);
        names(nest_compress::data::read_matrix(&f), "m.npy")?;
        let f = write(d.path(), "m.safetensors", &s);
        names(nest_compress::data::read_matrix(&f), "m.safetensors")?;
        let i = write(d.path(), "ids.txt", &ids);
        let m = write(d.path(), "ok.npy", &npy());
        names(nest_compress::data::read_embeddings(&m, Some(&i)), "ids.txt")?;
        let a = d.path().join("adaptor");
        write(&a, "adaptor.json", &aj);
        write(&a, "adaptor.safetensors", &s);
        if let Err(e) = nest_model::Adaptor::load(&a) {
            let m = e.to_string();
            prop_assert!(m.contains("adaptor.json") || m.contains("adaptor.safetensors"), "{m}");
        }
    }

    #[test]
    fn reports_keys_and_checkpoint_state(rep in input(br#"{"model":"m","tasks":[]}"#.to_vec()), keys in input(b"# k\n0123456789abcdef0\n".to_vec()), st in input(br#"{"step":3,"epoch":0,"next_batch":3,"recipe_sha256":"x","model":"m","last_loss":1.0}"#.to_vec())) {
        let d = tempfile::tempdir().unwrap();
        let f = write(d.path(), "report.json", &rep);
        names(nest_eval::Report::read(&f), "report.json")?;
        let f = write(d.path(), "keys.txt", &keys);
        names(nest_serve::auth::Access::read_file(&f).map_err(|e| e.to_string()).and_then(|k| nest_serve::auth::Access::new(&k, false).map_err(|e| e.to_string())), "keys.txt")?;
        let ck = d.path().join("step-00000003");
        write(&ck, "state.json", &st);
        write(&ck, "optimizer.safetensors", &safetensors("m.w"));
        if let Err(e) = nest_train::checkpoint::load(&ck) {
            prop_assert!(e.to_string().contains("step-00000003"), "{e}");
        }
    }
}

/// Hand-made hostile files: sizes that would allocate terabytes, headers longer than the file,
/// deep nesting, a NUL in a TSV, a BOM, CRLF line ends.
#[test]
fn hostile_files_give_errors_not_aborts() {
    let d = tempfile::tempdir().unwrap();
    let huge_npy = npy_with_shape("(999999999999, 3)");
    let f = write(d.path(), "huge.npy", &huge_npy);
    let e = nest_compress::data::read_matrix(&f)
        .unwrap_err()
        .to_string();
    assert!(e.contains("huge.npy"), "{e}");
    let mut st = u64::MAX.to_le_bytes().to_vec();
    st.extend_from_slice(b"{}");
    let f = write(d.path(), "huge.safetensors", &st);
    let e = nest_compress::data::read_matrix(&f)
        .unwrap_err()
        .to_string();
    assert!(e.contains("huge.safetensors"), "{e}");
    let big_shape =
        br#"{"embeddings":{"dtype":"F32","shape":[999999999,999999999],"data_offsets":[0,24]}}"#;
    let mut st = (big_shape.len() as u64).to_le_bytes().to_vec();
    st.extend_from_slice(big_shape);
    st.extend_from_slice(&[0u8; 24]);
    let f = write(d.path(), "shape.safetensors", &st);
    let e = nest_compress::data::read_matrix(&f)
        .unwrap_err()
        .to_string();
    assert!(e.contains("shape.safetensors"), "{e}");
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let f = write(d.path(), "nest.json", deep.as_bytes());
    let e = nest_model::config::read_json::<nest_model::NestMeta>(&f)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nest.json"), "{e}");
    let f = write(d.path(), "report.json", deep.as_bytes());
    assert!(nest_eval::Report::read(&f).is_err());
    let f = write(
        d.path(),
        "nul.tsv",
        b"sentence1\tsentence2\tscore\na\0b\tc\t1\n",
    );
    let _ = nest_core::data::read_sts(&f);
    let f = write(
        d.path(),
        "bom.tsv",
        "\u{feff}sentence1\tsentence2\tscore\r\na\tb\t1\r\n".as_bytes(),
    );
    if let Err(e) = nest_core::data::read_sts(&f) {
        assert!(e.to_string().contains("bom.tsv"), "{e}");
    }
    let deep_toml = format!("a = {}1{}\n", "[".repeat(50_000), "]".repeat(50_000));
    let f = write(d.path(), "deep.toml", deep_toml.as_bytes());
    let e = nest_train::Recipe::load(Some(&f), &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("deep.toml"), "{e}");
}
